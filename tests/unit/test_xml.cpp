#include "test_xml.h"

#include <chrono>
#include <fstream>
#include <gtest/gtest.h>

#include "process.h"
#include "test_support.h"

namespace flamebpf::testing {

std::string xml_problems(const std::string& document)
{
  TempDir dir;
  std::string path = (dir.path() / "document.svg").string();
  std::ofstream(path, std::ios::binary) << document;
  using namespace std::chrono_literals;
  auto result = run_process({"/usr/bin/xmllint", "--noout", path}, {}, 60s);
  std::string output = result.out + result.err;
  if (result.status != 0 && output.empty())
    return "xmllint failed (is libxml2-utils installed?)";
  return output;
}

} // namespace flamebpf::testing
