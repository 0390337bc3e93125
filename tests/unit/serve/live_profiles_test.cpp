#include <gtest/gtest.h>

#include "profile/by_target.h"
#include "serve/live_profiles.h"

namespace flamebpf::serve {
namespace {

using namespace std::chrono_literals;
using Clock = LiveProfiles::Clock;

Clock::time_point at(Clock::duration since_start)
{
  return Clock::time_point(1000s) + since_start;
}

profile::Stack stack(std::string target, std::string leaf, uint64_t count)
{
  profile::Stack stack;
  stack.target = std::move(target);
  stack.comm = "java";
  stack.frames = {{"main", "", profile::FrameKind::kNative},
                  {std::move(leaf), "", profile::FrameKind::kNative}};
  stack.count = count;
  return stack;
}

// A drain's profile over [start_second, end_second) of the wall clock, with the stacks given.
profile::SymbolizedProfile
drain(int start_second, int end_second, std::vector<profile::Stack> stacks)
{
  profile::SymbolizedProfile part;
  part.start = std::chrono::system_clock::time_point(std::chrono::seconds(start_second));
  part.end = std::chrono::system_clock::time_point(std::chrono::seconds(end_second));
  part.frequency_hz = 99;
  part.stacks = std::move(stacks);
  return part;
}

TEST(LiveProfiles, StartAtTheNextDrainAndSumTheirTargetUntilTheirSecondsPassed)
{
  LiveProfiles live;
  EXPECT_FALSE(live.drain_wanted_by());
  std::optional<profile::SymbolizedProfile> answered;
  ASSERT_TRUE(live.wait("web", 3s, [&](profile::SymbolizedProfile p) { answered = std::move(p); }));
  // Not started: a drain is wanted at once.
  EXPECT_EQ(live.drain_wanted_by(), Clock::time_point::min());

  // This drain holds samples from before the request: they are not the profile's.
  live.drained(drain(100, 101, {stack("web", "before", 50)}), at(0s));
  EXPECT_EQ(live.drain_wanted_by(), at(3s));
  live.drained(drain(101, 102, {stack("web", "heavy", 30), stack("db", "other", 70)}), at(1s));
  live.drained(drain(102, 103, {stack("db", "other", 70)}), at(2s));
  EXPECT_FALSE(answered);
  live.drained(drain(103, 104, {stack("web", "heavy", 5), stack("web", "light", 2)}), at(3s));
  ASSERT_TRUE(answered);
  EXPECT_EQ(live.waiting(), 0u);
  EXPECT_FALSE(live.drain_wanted_by());
  EXPECT_EQ(answered->start, std::chrono::system_clock::time_point(101s));
  EXPECT_EQ(answered->end, std::chrono::system_clock::time_point(104s));
  EXPECT_EQ(answered->frequency_hz, 99u);
  std::map<std::string, uint64_t> leaves;
  for (const auto& s : answered->stacks) {
    EXPECT_EQ(s.target, "web");
    leaves[s.frames.back().name] += s.count;
  }
  EXPECT_EQ(leaves, (std::map<std::string, uint64_t>{{"heavy", 35}, {"light", 2}}));
}

TEST(LiveProfiles, EachRequestHasItsOwnStartEndAndTarget)
{
  LiveProfiles live;
  std::vector<std::string> order;
  std::map<std::string, uint64_t> samples;
  auto done = [&](std::string name) {
    return [&, name](profile::SymbolizedProfile p) {
      order.push_back(name);
      samples[name] = p.total_samples();
    };
  };
  ASSERT_TRUE(live.wait("web", 2s, done("web 2s")));
  live.drained(drain(0, 1, {stack("web", "a", 1)}), at(0s));
  ASSERT_TRUE(live.wait(profile::target_file_name("db/../x"), 1s, done("db 1s")));
  EXPECT_EQ(live.drain_wanted_by(), Clock::time_point::min()); // the new one's start
  live.drained(drain(1, 2, {stack("web", "a", 10), stack("db/../x", "b", 20)}), at(1s));
  live.drained(drain(2, 3, {stack("web", "a", 100), stack("db/../x", "b", 200)}), at(2s));
  EXPECT_EQ(order, (std::vector<std::string>{"web 2s", "db 1s"}));
  EXPECT_EQ(samples["web 2s"], 110u);
  EXPECT_EQ(samples["db 1s"], 200u);
}

TEST(LiveProfiles, AtMostSoManyWaitAndClearDropsThem)
{
  LiveProfiles live;
  int answered = 0;
  for (size_t i = 0; i < LiveProfiles::kMaxWaiting; ++i)
    ASSERT_TRUE(live.wait("web", 1s, [&](profile::SymbolizedProfile) { ++answered; }));
  EXPECT_FALSE(live.wait("web", 1s, [&](profile::SymbolizedProfile) { ++answered; }));
  EXPECT_EQ(live.waiting(), LiveProfiles::kMaxWaiting);
  live.clear();
  EXPECT_EQ(live.waiting(), 0u);
  live.drained(drain(0, 1, {}), at(0s));
  live.drained(drain(1, 2, {}), at(5s));
  EXPECT_EQ(answered, 0);
}

TEST(LiveProfiles, TargetsBeingRecordedAreKnownByTheirDirectories)
{
  LiveProfiles live;
  live.target_added("web");
  live.target_added("Web Shop/../x");
  EXPECT_TRUE(live.recording("web"));
  EXPECT_TRUE(live.recording(profile::target_file_name("Web Shop/../x")));
  EXPECT_FALSE(live.recording("Web Shop/../x"));
  live.target_removed("web");
  EXPECT_FALSE(live.recording("web"));
}

} // namespace
} // namespace flamebpf::serve
