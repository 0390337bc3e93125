// The Go split workload as tests/progs/go/make-go-splits.sh built it into GO_SPLITS_DIR, once per
// Go toolchain found: for the unit and integration tests of Go binaries.
#pragma once

#include <cctype>
#include <cstdint>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
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

// How a profile of the split workload divides: samples named, rooted where Go's stacks are, under
// each caller, and through each way of reaching the leaf.
struct GoSplitShares {
  uint64_t total = 0, named = 0, rooted = 0, heavy = 0, light = 0, work_inlined = 0,
           work_framed = 0, through_cgo = 0;
  std::vector<std::string> unnamed_examples;
};

// The shares of folded stacks (stack -> samples) of the split workload.
inline GoSplitShares go_split_shares(const std::map<std::string, uint64_t>& stacks)
{
  GoSplitShares shares;
  for (const auto& [stack, count] : stacks) {
    shares.total += count;
    // An address left unnamed reads "<file>+0x<offset>".
    bool named = stack.find("+0x") == std::string::npos;
    shares.named += named ? count : 0;
    if (!named && shares.unnamed_examples.size() < 3)
      shares.unnamed_examples.push_back(stack);
    bool rooted = stack.find(";runtime.goexit;") != std::string::npos ||
                  stack.find(";runtime.main;") != std::string::npos;
    shares.rooted += rooted ? count : 0;
    shares.heavy += stack.find(";main.heavy;") != std::string::npos ? count : 0;
    shares.light += stack.find(";main.light;") != std::string::npos ? count : 0;
    shares.work_inlined += stack.find(";main.work_[i];main.spin") != std::string::npos ? count : 0;
    shares.work_framed += stack.find(";main.work;main.spin") != std::string::npos ? count : 0;
    // Go's frames, the switch to the system stack (Go 1.19's asmcgocall keeps its caller's
    // frame pointer, so runtime.cgocall is passed; later ones keep a frame), then cgo's C
    // wrapper and the C leaf.
    bool through_cgo = stack.find(";main._Cfunc_spin.abi0;") != std::string::npos &&
                       stack.find(";runtime.asmcgocall.abi0;_cgo_") != std::string::npos &&
                       stack.ends_with("_Cfunc_spin;spin");
    shares.through_cgo += through_cgo ? count : 0;
  }
  return shares;
}

// What every profile of the split workload shows: >= 99 % of samples named, >= 95 % rooted where
// Go's stacks are, and heavy's share three times light's within 10 %. context goes with a failure.
inline void expect_named_rooted_and_split(const GoSplitShares& shares, const std::string& context)
{
  EXPECT_GE(shares.named * 100, shares.total * 99)
      << shares.named << " of " << shares.total << " named; e.g. "
      << (shares.unnamed_examples.empty() ? "" : shares.unnamed_examples[0]) << "\n"
      << context;
  EXPECT_GE(shares.rooted * 100, shares.total * 95)
      << shares.rooted << " of " << shares.total << " reach runtime.goexit or runtime.main";
  ASSERT_GT(shares.light, 0u) << context;
  double ratio = static_cast<double>(shares.heavy) / static_cast<double>(shares.light);
  EXPECT_GT(ratio, 2.7) << shares.heavy << " under heavy, " << shares.light << " under light";
  EXPECT_LT(ratio, 3.3) << shares.heavy << " under heavy, " << shares.light << " under light";
}

} // namespace flamebpf::testing
