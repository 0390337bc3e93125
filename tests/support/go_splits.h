// The Go split workload as tests/progs/go/make-go-splits.sh built it into GO_SPLITS_DIR, once per
// Go toolchain found: for the unit and integration tests of Go binaries.
#pragma once

#include <cctype>
#include <fstream>
#include <string>
#include <vector>

namespace flamebpf::testing {

// The toolchains' versions ("go1.19.8"), one directory each.
inline std::vector<std::string> go_split_versions()
{
  std::ifstream file(std::string(GO_SPLITS_DIR) + "/versions");
  std::vector<std::string> found;
  for (std::string line; std::getline(file, line);)
    if (!line.empty())
      found.push_back(line);
  return found;
}

// A variant's path ("split.stripped") as version built it.
inline std::string go_split(const std::string& version, const std::string& variant)
{
  return std::string(GO_SPLITS_DIR) + "/" + version + "/" + variant;
}

// A version as a test's name may hold it: go1_19_8.
inline std::string go_test_name(std::string version)
{
  for (char& c : version)
    if (!std::isalnum(static_cast<unsigned char>(c)))
      c = '_';
  return version;
}

} // namespace flamebpf::testing
