#include <gtest/gtest.h>

#include "profile/drop_report.h"

namespace flamebpf::profile {
namespace {

bool any_line_contains(const std::vector<std::string>& lines, const std::string& text)
{
  for (const auto& line : lines) {
    if (line.find(text) != std::string::npos)
      return true;
  }
  return false;
}

TEST(DescribeDrops, NothingLostSaysNothing)
{
  profile::DropCounters counters;
  EXPECT_TRUE(describe_drops(counters).empty());
  EXPECT_EQ(total_drops(counters), 0u);

  // Samples and filtered samples are not losses.
  counters.counts[FB_COUNTER_SAMPLES] = 1000;
  counters.counts[FB_COUNTER_FILTERED] = 500;
  EXPECT_TRUE(describe_drops(counters).empty());
  EXPECT_EQ(total_drops(counters), 0u);
}

TEST(DescribeDrops, CollisionsSumKernelAndUserStacks)
{
  profile::DropCounters counters;
  counters.counts[FB_COUNTER_KSTACK_COLLISION] = 3;
  counters.counts[FB_COUNTER_USTACK_COLLISION] = 4;
  auto lines = describe_drops(counters);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "7 stacks lost to collisions; raise --stack-storage");
  EXPECT_EQ(total_drops(counters), 7u);

  counters.counts[FB_COUNTER_KSTACK_COLLISION] = 0;
  lines = describe_drops(counters);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "4 stacks lost to collisions; raise --stack-storage");
}

TEST(DescribeDrops, OneLinePerKindNamingTheOption)
{
  profile::DropCounters counters;
  counters.counts[FB_COUNTER_KSTACK_COLLISION] = 1;
  counters.counts[FB_COUNTER_STACK_MAP_FULL] = 2;
  counters.counts[FB_COUNTER_COUNT_MAP_FULL] = 3;
  counters.counts[FB_COUNTER_KSTACK_ERROR] = 4;
  counters.counts[FB_COUNTER_USTACK_MISSING] = 5;
  counters.counts[FB_COUNTER_NOTICE_LOST] = 6;
  auto lines = describe_drops(counters);
  EXPECT_EQ(lines.size(), 6u);
  EXPECT_TRUE(any_line_contains(lines, "1 stacks lost to collisions; raise --stack-storage"));
  EXPECT_TRUE(any_line_contains(lines, "2 stacks lost to a full stack map; raise --stack-storage"));
  EXPECT_TRUE(
      any_line_contains(lines, "3 samples lost to a full count map; raise --count-storage"));
  EXPECT_TRUE(any_line_contains(lines, "4 kernel stacks could not be read"));
  EXPECT_TRUE(any_line_contains(lines, "5 user stacks could not be read"));
  EXPECT_TRUE(any_line_contains(lines, "6 new-process notices lost"));
  // Lost notices degrade symbolization but lose no sample.
  EXPECT_EQ(total_drops(counters), 1u + 2 + 3 + 4 + 5);
}

TEST(DescribeCutStacks, SanityFailuresReadFailuresAndDepthEachGetALineAndNoDrop)
{
  profile::DropCounters counters;
  counters.counts[FB_COUNTER_UNWIND_SP_BACKWARDS] = 1;
  counters.counts[FB_COUNTER_UNWIND_BAD_ROW] = 2;
  counters.counts[FB_COUNTER_UNWIND_READ_FAILED] = 3;
  counters.counts[FB_COUNTER_UNWIND_TRUNCATED] = 4;
  auto lines = describe_cut_stacks(counters);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_TRUE(any_line_contains(lines, "3 user stacks cut short where an unwind step went wrong"));
  EXPECT_TRUE(any_line_contains(lines, "3 user stacks cut short where their memory could not"));
  EXPECT_TRUE(any_line_contains(lines, "4 user stacks cut at their deepest"));
  // A cut stack is still counted, with the frames found.
  EXPECT_TRUE(describe_drops(counters).empty());
  EXPECT_EQ(total_drops(counters), 0u);
  EXPECT_TRUE(describe_cut_stacks(profile::DropCounters{}).empty());
}

} // namespace
} // namespace flamebpf::profile
