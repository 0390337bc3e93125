// A Go binary's inlined calls, read from its pclntab a function at a time as frames need them.
#include <chrono>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "common/elf_reader.h"
#include "common/stall_guard.h"
#include "common/unique_fd.h"
#include "go_splits.h"
#include "runtimes/go/pclntab.h"
#include "symbolize/go_inlines.h"
#include "test_support.h"

namespace flamebpf::symbolize {
namespace {

class GoInlineTreeTest : public ::testing::TestWithParam<std::string> {
protected:
  std::string path(const std::string& variant) const
  {
    return testing::go_split(GetParam(), variant);
  }
};

// The addresses of main.heavy where main.work runs inlined into it, and every function's middle.
struct Addresses {
  std::vector<uint64_t> work_in_heavy;
  std::vector<uint64_t> middles;
};

Addresses addresses_of(const std::string& path)
{
  Addresses found;
  auto elf = testing::open_elf(path);
  EXPECT_TRUE(elf.has_value()) << path;
  if (!elf)
    return found;
  auto table = go::Pclntab::open(elf->reader);
  EXPECT_TRUE(table && *table);
  if (!table || !*table)
    return found;
  go::Pclntab& pclntab = **table;
  std::vector<go::PcValueRun> runs;
  std::vector<go::Pclntab::InlinedCall> calls;
  for (size_t i = 0; i < pclntab.size(); ++i) {
    go::GoFunction function = pclntab.function(i);
    found.middles.push_back(function.entry + (function.end - function.entry) / 2);
    if (pclntab.name(i) != "main.heavy" || !pclntab.inline_tree(i, runs, calls))
      continue;
    for (const auto& run : runs) {
      if (run.value >= 0 && calls[static_cast<size_t>(run.value)].name == "main.work")
        found.work_in_heavy.push_back(run.begin);
    }
  }
  return found;
}

TEST_P(GoInlineTreeTest, NamesTheCallInlinedAtAnAddressAsFramesAskAndHoldsABoundedPart)
{
  for (const char* variant : {"split.stripped", "split.pie.external"}) {
    SCOPED_TRACE(variant);
    Addresses addresses = addresses_of(path(variant));
    ASSERT_FALSE(addresses.work_in_heavy.empty());
    UniqueFd fd(::open(path(variant).c_str(), O_RDONLY | O_CLOEXEC));
    std::vector<std::string> problems;
    auto tree = GoInlineTree::open(fd.get(), variant, problems);
    ASSERT_NE(tree, nullptr) << (problems.empty() ? "" : problems.front());
    fd.reset(); // the tree keeps a descriptor of its own
    size_t before = tree->memory_bytes();
    StallGuard guard(std::chrono::milliseconds(1000));
    for (uint64_t address : addresses.work_in_heavy) {
      auto inlined = tree->at(address, &guard);
      ASSERT_FALSE(inlined.empty()) << std::hex << address;
      EXPECT_EQ(inlined.front().name, "main.work");
    }
    EXPECT_GT(tree->memory_bytes(), before);
    // A lookup in every function holds at most the trees' budget, and names inlined calls still.
    size_t inside_calls = 0;
    for (uint64_t address : addresses.middles)
      inside_calls += !tree->at(address, nullptr).empty();
    EXPECT_GT(inside_calls, 0u);
    EXPECT_LE(tree->memory_bytes(), before + kMaxGoInlineTreeBytes + (64 << 10));
    EXPECT_EQ(tree->at(addresses.work_in_heavy.front(), nullptr).front().name, "main.work");
  }
}

// A file that is no Go binary has no tree.
TEST(GoInlineTree, NoGoBinaryHasNone)
{
  UniqueFd fd(::open(FLAMEBPF_ELF_FIXTURE_PLAIN, O_RDONLY | O_CLOEXEC));
  std::vector<std::string> problems;
  EXPECT_EQ(GoInlineTree::open(fd.get(), "fixture", problems), nullptr);
}

INSTANTIATE_TEST_SUITE_P(GoToolchains,
                         GoInlineTreeTest,
                         ::testing::ValuesIn(testing::go_split_versions()),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           return testing::go_test_name(param.param);
                         });

} // namespace
} // namespace flamebpf::symbolize
