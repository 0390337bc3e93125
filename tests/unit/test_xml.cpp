#include "test_xml.h"

#include <array>
#include <cstdio>
#include <fstream>
#include <gtest/gtest.h>

#include "test_support.h"

namespace flamebpf::testing {

std::string xml_problems(const std::string& document)
{
  TempDir dir;
  std::string path = (dir.path() / "document.svg").string();
  std::ofstream(path, std::ios::binary) << document;
  std::string command = "xmllint --noout '" + path + "' 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe)
    return "cannot run xmllint";
  std::string output;
  std::array<char, 4096> buffer{};
  while (size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe))
    output.append(buffer.data(), n);
  int status = ::pclose(pipe);
  if (status != 0 && output.empty())
    return "xmllint failed (is libxml2-utils installed?)";
  return output;
}

} // namespace flamebpf::testing
