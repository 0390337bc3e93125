// flamebpf --version names the version and the commit of the checkout it was built from.
#include <gtest/gtest.h>
#include <string>

#include "harness.h"

namespace flamebpf::testing {
namespace {

// HEAD of the source tree the binary was built from, as git sees it now.
std::string source_head()
{
  TempDir dir;
  std::string output = (dir.path() / "head").string();
  // sudo runs the tests as root in a checkout another user may own: git is told that it is safe.
  Child git({"/usr/bin/git", "-c", "safe.directory=" FLAMEBPF_SOURCE_DIR, "-C", FLAMEBPF_SOURCE_DIR,
             "rev-parse", "HEAD"},
            "", output);
  EXPECT_EQ(git.wait(), 0) << read_text(output);
  std::string head = read_text(output);
  while (!head.empty() && (head.back() == '\n' || head.back() == '\r'))
    head.pop_back();
  return head;
}

TEST(Version, NamesTheVersionAndTheCommitBuiltFrom)
{
  auto run = run_flamebpf({"--version"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.rfind("flamebpf " FLAMEBPF_VERSION " (commit ", 0), 0u) << run.output;
  std::string head = source_head();
  ASSERT_EQ(head.size(), 40u) << head;
  EXPECT_NE(run.output.find("commit " + head), std::string::npos)
      << run.output << "is not the checkout's HEAD " << head;
}

} // namespace
} // namespace flamebpf::testing
