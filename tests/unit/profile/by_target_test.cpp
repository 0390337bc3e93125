#include <gtest/gtest.h>

#include "profile/by_target.h"

namespace flamebpf::profile {
namespace {

TEST(SplitByTarget, EachTargetGetsOnlyItsStacks)
{
  SymbolizedProfile profile;
  profile.frequency_hz = 99;
  profile.counters.counts[FB_COUNTER_SAMPLES] = 12;
  profile.stacks = {{1, "a", "web", {}, 3}, {2, "b", "db", {}, 4}, {3, "c", "web", {}, 5}};
  auto parts = split_by_target(profile);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts.at("web").total_samples(), 8u);
  EXPECT_EQ(parts.at("web").stacks.size(), 2u);
  EXPECT_EQ(parts.at("db").total_samples(), 4u);
  EXPECT_EQ(parts.at("db").frequency_hz, 99u);
  EXPECT_EQ(parts.at("db").counters[FB_COUNTER_SAMPLES], 12u);
  EXPECT_TRUE(split_by_target(SymbolizedProfile{}).empty());
}

} // namespace
} // namespace flamebpf::profile
