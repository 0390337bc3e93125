// Where recording mode writes its profiles.
#pragma once

#include <string>

namespace flamebpf::pipeline {

// ./flamebpf-<UTC time>.folded for a recording that starts now.
std::string default_output_path();

// The file of one target when the profile is split per target: "out.folded" and target "web"
// give "out.web.folded"; a path without an extension gets ".web" appended. Characters other than
// letters, digits, '.', '_' and '-' in the target name become '_', so a name cannot leave the
// output's directory or hide its extension.
std::string output_path_for_target(const std::string& path, const std::string& target);

} // namespace flamebpf::pipeline
