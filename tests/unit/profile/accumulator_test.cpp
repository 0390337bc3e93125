#include <chrono>
#include <gtest/gtest.h>

#include "profile/accumulator.h"

namespace flamebpf::profile {
namespace {

using std::chrono::seconds;
using std::chrono::system_clock;

const system_clock::time_point kEpoch{seconds(1700000000)};

Stack stack_of(uint32_t pid, std::vector<std::string> names, uint64_t count)
{
  Stack stack;
  stack.pid = pid;
  stack.comm = "burner";
  for (auto& name : names)
    stack.frames.push_back({std::move(name), "/usr/bin/burner", FrameKind::kNative});
  stack.count = count;
  return stack;
}

SymbolizedProfile interval(int from, int to, std::vector<Stack> stacks)
{
  SymbolizedProfile profile;
  profile.start = kEpoch + seconds(from);
  profile.end = kEpoch + seconds(to);
  profile.frequency_hz = 49;
  profile.stacks = std::move(stacks);
  return profile;
}

const Stack* find(const SymbolizedProfile& profile, uint32_t pid, const std::string& leaf)
{
  for (const auto& stack : profile.stacks) {
    if (stack.pid == pid && !stack.frames.empty() && stack.frames.back().name == leaf)
      return &stack;
  }
  return nullptr;
}

TEST(Accumulator, EqualStacksAddTheirLostAndCutSamples)
{
  Accumulator total;
  auto first = stack_of(10, {"main", "run"}, 5);
  first.cut_samples = 5;
  auto second = stack_of(10, {"main", "run"}, 3);
  second.lost_samples = 1;
  total.add(interval(0, 1, {first}));
  total.add(interval(1, 2, {second}));
  const Stack* merged = find(total.total(), 10, "run");
  ASSERT_NE(merged, nullptr);
  EXPECT_EQ(merged->count, 8u);
  EXPECT_EQ(merged->cut_samples, 5u);
  EXPECT_EQ(merged->lost_samples, 1u);
}

TEST(Accumulator, LaterLabelsOfATargetWinAndTheNodeIsKept)
{
  Accumulator accumulator;
  auto first = interval(0, 1, {stack_of(1, {"main"}, 1)});
  first.node = "node-7";
  first.target_labels["web"] = {"web", std::string(64, 'a'), "", ""};
  first.target_labels["db"] = {"db", std::string(64, 'b'), "", ""};
  accumulator.add(std::move(first));
  // web was made again under its name, with a new ID.
  auto second = interval(1, 2, {stack_of(1, {"main"}, 1)});
  second.target_labels["web"] = {"web", std::string(64, 'c'), "", ""};
  accumulator.add(std::move(second));
  const auto& total = accumulator.total();
  EXPECT_EQ(total.node, "node-7");
  EXPECT_EQ(total.target_labels.at("web").container_id, std::string(64, 'c'));
  EXPECT_EQ(total.target_labels.at("db").container_id, std::string(64, 'b'));
}

TEST(Accumulator, EmptyTotal)
{
  Accumulator accumulator;
  EXPECT_TRUE(accumulator.total().stacks.empty());
  EXPECT_EQ(accumulator.total().total_samples(), 0u);
}

TEST(Accumulator, EqualStacksAcrossIntervalsSumCounts)
{
  Accumulator accumulator;
  accumulator.add(interval(0, 10, {stack_of(1, {"main", "a"}, 3), stack_of(1, {"main", "b"}, 1)}));
  accumulator.add(interval(10, 20, {stack_of(1, {"main", "a"}, 4)}));
  accumulator.add(interval(20, 30, {stack_of(1, {"main", "b"}, 2), stack_of(1, {"main", "a"}, 5)}));

  const auto& total = accumulator.total();
  ASSERT_EQ(total.stacks.size(), 2u);
  ASSERT_NE(find(total, 1, "a"), nullptr);
  EXPECT_EQ(find(total, 1, "a")->count, 12u);
  ASSERT_NE(find(total, 1, "b"), nullptr);
  EXPECT_EQ(find(total, 1, "b")->count, 3u);
  EXPECT_EQ(total.total_samples(), 15u);
}

TEST(Accumulator, DistinctPidsStayDistinct)
{
  Accumulator accumulator;
  accumulator.add(interval(0, 1, {stack_of(1, {"main", "a"}, 3), stack_of(2, {"main", "a"}, 4)}));
  accumulator.add(interval(1, 2, {stack_of(2, {"main", "a"}, 1)}));

  const auto& total = accumulator.total();
  ASSERT_EQ(total.stacks.size(), 2u);
  EXPECT_EQ(find(total, 1, "a")->count, 3u);
  EXPECT_EQ(find(total, 2, "a")->count, 5u);
}

TEST(Accumulator, FrameKindModuleAndTargetAreIdentity)
{
  Accumulator accumulator;
  Stack native = stack_of(1, {"main", "f"}, 1);
  Stack kernel = native;
  kernel.frames.back().kind = FrameKind::kKernel;
  Stack other_module = native;
  other_module.frames.back().module = "/usr/lib/libother.so";
  Stack other_target = native;
  other_target.target = "docker/4f3c";
  // Frame boundaries matter: "main","f" is not "mainf".
  Stack joined = stack_of(1, {"mainf"}, 1);
  accumulator.add(interval(0, 1, {native, kernel, other_module, other_target, joined}));
  accumulator.add(interval(1, 2, {native}));

  const auto& total = accumulator.total();
  ASSERT_EQ(total.stacks.size(), 5u);
  EXPECT_EQ(total.stacks[0].count, 2u);
  EXPECT_EQ(total.stacks[0].frames, native.frames);
  EXPECT_EQ(total.stacks[3].target, "docker/4f3c");
}

// An interpreted frame at two lines is one name, but pprof puts each line apart: the stacks are
// two.
TEST(Accumulator, AnInterpretedFrameAtAnotherLineIsAnotherStack)
{
  Accumulator accumulator;
  Stack at_line = stack_of(1, {"main"}, 1);
  at_line.frames.push_back({"work (/app/split.py:1)", "", FrameKind::kInterpreted});
  at_line.frames.back().line = 3;
  Stack at_other_line = at_line;
  at_other_line.frames.back().line = 4;
  accumulator.add(interval(0, 1, {at_line, at_other_line}));
  accumulator.add(interval(1, 2, {at_line}));
  const auto& total = accumulator.total();
  ASSERT_EQ(total.stacks.size(), 2u);
  EXPECT_EQ(total.stacks[0].frames.back().line, 3u);
  EXPECT_EQ(total.stacks[0].count, 2u);
  EXPECT_EQ(total.stacks[1].frames.back().line, 4u);
  EXPECT_EQ(total.stacks[1].count, 1u);
}

// Unnamed code at two addresses reads alike but may be named apart later; a name is held once
// (the index keeps a hash of each stack, not its names again).
TEST(Accumulator, FramesToBeNamedLaterStayApartAndNamesAreHeldOnce)
{
  Accumulator accumulator;
  Stack first = stack_of(1, {"main", "burner+0x10"}, 1);
  first.frames.back().late = 1;
  Stack second = first;
  second.frames.back().late = 2;
  accumulator.add(interval(0, 1, {first, second, first}));
  ASSERT_EQ(accumulator.total().stacks.size(), 2u);
  EXPECT_EQ(accumulator.total().stacks[0].count, 2u);

  Accumulator long_names;
  std::string name(10000, 'n');
  long_names.add(interval(0, 1, {stack_of(1, {name}, 1)}));
  EXPECT_GT(long_names.held_bytes(), name.size());
  EXPECT_LT(long_names.held_bytes(), name.size() + 1000);
}

TEST(Accumulator, SpansFromFirstStartToLastEnd)
{
  Accumulator accumulator;
  accumulator.add(interval(5, 10, {}));
  accumulator.add(interval(10, 15, {}));
  accumulator.add(interval(15, 22, {}));
  EXPECT_EQ(accumulator.total().start, kEpoch + seconds(5));
  EXPECT_EQ(accumulator.total().end, kEpoch + seconds(22));
  EXPECT_EQ(accumulator.total().frequency_hz, 49u);
}

TEST(Accumulator, CountersAreSummed)
{
  Accumulator accumulator;
  auto first = interval(0, 1, {});
  first.counters.counts[FB_COUNTER_SAMPLES] = 10;
  first.counters.counts[FB_COUNTER_KSTACK_COLLISION] = 1;
  auto second = interval(1, 2, {});
  second.counters.counts[FB_COUNTER_SAMPLES] = 32;
  second.counters.counts[FB_COUNTER_COUNT_MAP_FULL] = 2;
  accumulator.add(first);
  accumulator.add(second);
  const auto& counters = accumulator.total().counters;
  EXPECT_EQ(counters[FB_COUNTER_SAMPLES], 42u);
  EXPECT_EQ(counters[FB_COUNTER_KSTACK_COLLISION], 1u);
  EXPECT_EQ(counters[FB_COUNTER_COUNT_MAP_FULL], 2u);
  EXPECT_EQ(counters[FB_COUNTER_FILTERED], 0u);
}

} // namespace
} // namespace flamebpf::profile
