#include <gtest/gtest.h>
#include <set>
#include <sstream>
#include <string>

#include "dumps/metrics.h"

namespace flamebpf::dumps {
namespace {

profile::SymbolizedProfile interval_of(const std::string& target, uint64_t samples)
{
  profile::SymbolizedProfile profile;
  profile::Stack stack;
  stack.target = target;
  stack.count = samples;
  profile.stacks.push_back(stack);
  return profile;
}

void add(Metrics& metrics, const profile::SymbolizedProfile& profile)
{
  IntervalStats stats;
  stats.profile = &profile;
  stats.usage.rss_bytes = 1234;
  metrics.add(stats);
}

TEST(Metrics, CountersAddUpOverIntervalsWithTheTargetsLabels)
{
  Metrics metrics;
  auto first = interval_of("web", 5);
  first.target_labels["web"] = {"shop", "abc123", "prod", "shop-7d9"};
  first.counters.counts[FB_COUNTER_STACK_MAP_FULL] = 2;
  first.symbolize_stats.jit_frames = 10;
  first.symbolize_stats.jit_unnamed = 1;
  add(metrics, first);
  auto second = interval_of("", 3);
  add(metrics, second);
  add(metrics, interval_of("web", 4));
  std::string text = metrics.text();
  EXPECT_NE(text.find("flamebpf_samples_total{target=\"web\",container=\"shop\","
                      "container_id=\"abc123\",namespace=\"prod\",pod=\"shop-7d9\"} 9\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("flamebpf_samples_total{target=\"host\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("flamebpf_dropped_samples_total{kind=\"stack_map_full\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("flamebpf_unnamed_user_frames_total{code=\"jit\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("flamebpf_resident_memory_bytes 1234\n"), std::string::npos);
  EXPECT_NE(text.find("flamebpf_intervals_total 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE flamebpf_samples_total counter\n"), std::string::npos);
  EXPECT_EQ(text.back(), '\n');
}

// The family of each sample line is the one its TYPE line announced last, and no family is
// announced twice: Prometheus' text format has a family's samples together after its TYPE.
void expect_families_in_one_piece(const std::string& text)
{
  std::istringstream lines(text);
  std::set<std::string> announced;
  std::string family;
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("# TYPE ")) {
      family = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_TRUE(announced.insert(family).second) << "announced twice: " << family;
    } else if (!line.starts_with("#")) {
      std::string name = line.substr(0, line.find_first_of("{ "));
      EXPECT_EQ(name, family) << line;
    }
  }
}

TEST(Metrics, CoverageGaugesOfTheLastIntervalAndCountersOfItsParts)
{
  Metrics metrics;
  profile::SymbolizedProfile profile = interval_of("web", 90);
  profile.frequency_hz = 100;
  profile.stacks.push_back(profile.stacks[0]);
  profile.stacks[1].count = 10;
  profile.stacks[1].cut_samples = 10;
  IntervalStats stats;
  stats.profile = &profile;
  stats.coverage = profile::measure_coverage(profile, {{"web", 1.0}, {"idle", 0.01}});
  metrics.add(stats);
  metrics.add(stats);
  std::string text = metrics.text();
  EXPECT_NE(text.find("flamebpf_coverage_ratio{target=\"web\"} 0.9000\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("flamebpf_coverage_shortfall_ratio{target=\"web\",reason=\"unwinding\"} "
                      "0.1000\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("flamebpf_coverage_shortfall_ratio{target=\"web\",reason=\"naming\"} "
                      "0.0000\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("flamebpf_whole_samples_total{target=\"web\"} 180\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("flamebpf_target_cpu_seconds_total{target=\"web\"} 2.000000\n"),
            std::string::npos)
      << text;
  // Too little CPU time to judge: counted, but no ratio.
  EXPECT_NE(text.find("flamebpf_target_cpu_seconds_total{target=\"idle\"} 0.020000\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("flamebpf_coverage_ratio{target=\"idle\"}"), std::string::npos) << text;
  expect_families_in_one_piece(text);
}

TEST(Metrics, HostileTargetNamesAreEscapedValidUtf8)
{
  EXPECT_EQ(label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(label_value("bad\xff"), "bad\xEF\xBF\xBD");
  Metrics metrics;
  add(metrics, interval_of("x\"} 1\nfake_metric 2\n", 1));
  std::string text = metrics.text();
  EXPECT_EQ(text.find("\nfake_metric"), std::string::npos) << text;
  EXPECT_NE(text.find("flamebpf_samples_total{target=\"x\\\"} 1\\nfake_metric 2\\n\"} 1\n"),
            std::string::npos)
      << text;
}

TEST(Metrics, TargetsWithoutSamplesForAWhileAreForgotten)
{
  Metrics metrics;
  add(metrics, interval_of("gone", 1));
  for (uint64_t i = 0; i + 1 < Metrics::kForgetAfterIntervals; ++i)
    add(metrics, interval_of("stays", 1));
  EXPECT_NE(metrics.text().find("target=\"gone\""), std::string::npos);
  add(metrics, interval_of("stays", 1));
  EXPECT_EQ(metrics.text().find("target=\"gone\""), std::string::npos);
  EXPECT_NE(metrics.text().find("target=\"stays\"} 60\n"), std::string::npos) << metrics.text();
}

} // namespace
} // namespace flamebpf::dumps
