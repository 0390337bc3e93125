#include <gtest/gtest.h>
#include <string>

#include "profile/coverage.h"

namespace flamebpf::profile {
namespace {

Stack stack_of(const std::string& target,
               uint64_t count,
               std::vector<Frame> frames = {{"main", "/bin/w", FrameKind::kNative}})
{
  Stack stack;
  stack.target = target;
  stack.count = count;
  stack.frames = std::move(frames);
  return stack;
}

SymbolizedProfile profile_at(uint32_t frequency_hz)
{
  SymbolizedProfile profile;
  profile.frequency_hz = frequency_hz;
  return profile;
}

TEST(Coverage, WholeSamplesOfAllTheCpuTimeCoverIt)
{
  auto profile = profile_at(100);
  profile.stacks = {stack_of("web", 150), stack_of("web", 48), stack_of("other", 7)};
  auto coverage = measure_coverage(profile, {{"web", 2.0}});
  ASSERT_EQ(coverage.size(), 1u); // only the targets whose CPU time was measured
  const auto& web = coverage[0];
  EXPECT_EQ(web.target, "web");
  EXPECT_DOUBLE_EQ(web.expected_samples, 200);
  EXPECT_EQ(web.samples, 198u);
  EXPECT_EQ(web.whole_samples, 198u);
  EXPECT_DOUBLE_EQ(web.coverage, 0.99);
  EXPECT_DOUBLE_EQ(web.sampling, 2);
  EXPECT_TRUE(judged(web));
  EXPECT_FALSE(falls_short(web));
  EXPECT_EQ(coverage_text(web), "99%");
}

TEST(Coverage, EachSampleIsShortForItsFirstReason)
{
  auto profile = profile_at(100);
  auto lost = stack_of("web", 10, {{"[user stack lost]", "", FrameKind::kUnknown}});
  lost.lost_samples = 10;
  auto cut_and_unnamed = stack_of("web", 20, {{"w+0x10", "/bin/w", FrameKind::kUnknown}});
  cut_and_unnamed.cut_samples = 15; // the other 5 reached their root, unnamed
  auto unnamed = stack_of(
      "web", 30, {{"main", "/bin/w", FrameKind::kNative}, {"[unknown]", "", FrameKind::kUnknown}});
  profile.stacks = {lost, cut_and_unnamed, unnamed, stack_of("web", 40)};
  auto coverage = measure_coverage(profile, {{"web", 1.0}});
  ASSERT_EQ(coverage.size(), 1u);
  const auto& web = coverage[0];
  EXPECT_EQ(web.samples, 100u);
  EXPECT_EQ(web.whole_samples, 40u);
  EXPECT_DOUBLE_EQ(web.drops, 10);
  EXPECT_DOUBLE_EQ(web.unwinding, 15);
  EXPECT_DOUBLE_EQ(web.naming, 35);
  EXPECT_DOUBLE_EQ(web.sampling, 0);
  EXPECT_DOUBLE_EQ(web.coverage, 0.4);
  EXPECT_EQ(web.reason, Shortfall::kNaming);
  EXPECT_TRUE(falls_short(web));
  EXPECT_EQ(coverage_text(web), "40% (naming)");
  std::string warning = coverage_warning(web, 100);
  EXPECT_NE(warning.find("target web: its profile covers 40% of the 1.00 CPU-seconds"),
            std::string::npos)
      << warning;
  EXPECT_NE(warning.find("35% of them, is naming"), std::string::npos) << warning;
  EXPECT_NE(warning.find("--debuginfod"), std::string::npos) << warning;
}

TEST(Coverage, MissingSamplesAreTheKernelsDropsAsFarAsTheyGoThenTheSamplingRate)
{
  auto profile = profile_at(100);
  profile.stacks = {stack_of("web", 50)};
  profile.counters.counts[FB_COUNTER_COUNT_MAP_FULL] = 20;
  profile.counters.counts[FB_COUNTER_TARGET_SHARE_FULL] = 10;
  auto coverage = measure_coverage(profile, {{"web", 1.0}});
  ASSERT_EQ(coverage.size(), 1u);
  EXPECT_DOUBLE_EQ(coverage[0].drops, 30);
  EXPECT_DOUBLE_EQ(coverage[0].sampling, 20);
  EXPECT_EQ(coverage[0].reason, Shortfall::kDrops);
  EXPECT_NE(coverage_warning(coverage[0], 100).find("raise --stack-storage or --count-storage"),
            std::string::npos);

  // Without drops the same shortfall is the sampling rate's.
  profile.counters = {};
  coverage = measure_coverage(profile, {{"web", 1.0}});
  EXPECT_DOUBLE_EQ(coverage[0].sampling, 50);
  EXPECT_EQ(coverage[0].reason, Shortfall::kSamplingRate);
  EXPECT_EQ(coverage_text(coverage[0]), "50% (sampling_rate)");
  EXPECT_NE(coverage_warning(coverage[0], 100).find("at 100 Hz"), std::string::npos);
}

TEST(Coverage, MoreSamplesThanTheCpuTimeReadAboveOneAndShortOfNothing)
{
  auto profile = profile_at(100);
  profile.stacks = {stack_of("web", 105)};
  auto coverage = measure_coverage(profile, {{"web", 1.0}});
  EXPECT_DOUBLE_EQ(coverage[0].coverage, 1.05);
  EXPECT_DOUBLE_EQ(coverage[0].sampling, 0);
  EXPECT_FALSE(falls_short(coverage[0]));
}

TEST(Coverage, ATargetWithLittleCpuTimeIsNotJudged)
{
  auto profile = profile_at(100);
  profile.stacks = {stack_of("idle", 3)};
  auto coverage = measure_coverage(profile, {{"idle", 0.1}, {"silent", 0.0}});
  ASSERT_EQ(coverage.size(), 2u);
  EXPECT_FALSE(judged(coverage[0]));
  EXPECT_FALSE(falls_short(coverage[0]));
  EXPECT_EQ(coverage_text(coverage[0]), "-");
  // No CPU time: nothing expected, nothing to divide by.
  EXPECT_EQ(coverage[1].target, "silent");
  EXPECT_DOUBLE_EQ(coverage[1].coverage, 0);
  EXPECT_FALSE(judged(coverage[1]));
}

TEST(Coverage, NoFrequencyNoCoverage)
{
  auto profile = profile_at(0);
  profile.stacks = {stack_of("web", 10)};
  EXPECT_TRUE(measure_coverage(profile, {{"web", 1.0}}).empty());
}

TEST(Coverage, SummaryNamesAFewTargetsAndOfManyThoseThatFallShort)
{
  auto profile = profile_at(100);
  std::map<std::string, double> used;
  for (int i = 0; i < 6; ++i) {
    std::string name = "t" + std::to_string(i);
    profile.stacks.push_back(stack_of(name, i == 2 ? 50 : 100));
    used[name] = 1.0;
  }
  auto all = measure_coverage(profile, used);
  EXPECT_EQ(coverage_summary({}), "");
  EXPECT_EQ(coverage_summary(coverage_of(all, "t1")), "coverage 100%");
  EXPECT_TRUE(coverage_of(all, "none").empty());
  std::vector<TargetCoverage> few(all.begin(), all.begin() + 3);
  EXPECT_EQ(coverage_summary(few), "coverage t0 100%, t1 100%, t2 50% (sampling_rate)");
  EXPECT_EQ(coverage_summary(all),
            "coverage of 6 targets: 5 \xE2\x89\xA5 90%, t2 50% (sampling_rate)");
}

} // namespace
} // namespace flamebpf::profile
