// Well-formedness of the XML the tests produce, checked by xmllint (libxml2-utils).
#pragma once

#include <string>

namespace flamebpf::testing {

// xmllint's complaints about document, or "" if it is well-formed XML.
std::string xml_problems(const std::string& document);

} // namespace flamebpf::testing
