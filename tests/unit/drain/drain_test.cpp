#include <algorithm>
#include <cerrno>
#include <gtest/gtest.h>
#include <map>
#include <utility>
#include <vector>

#include "drain/drain.h"

namespace flamebpf::drain {
namespace {

// In-memory double-buffered maps, recording every call the Drainer makes.
class FakeMaps final : public MapReader {
public:
  struct Buffer {
    std::vector<CountEntry> counts;
    std::map<int32_t, std::vector<uint64_t>> stacks;
    std::map<uint64_t, std::vector<uint64_t>> unwound; // by hash
    std::map<uint64_t, bool> cut;                      // by hash: the unwinder stopped early
  };

  Result<int> switch_buffer() override
  {
    ++switches;
    if (fail_switch)
      return fail(error("switch failed"));
    int idle = active;
    active = 1 - active;
    return idle;
  }

  Result<std::vector<CountEntry>> take_counts(int buffer) override
  {
    taken.push_back(buffer);
    return std::exchange(buffers[buffer].counts, {});
  }

  Result<std::vector<uint64_t>> read_stack(int buffer, int32_t stack_id) override
  {
    stack_reads.emplace_back(buffer, stack_id);
    auto it = buffers[buffer].stacks.find(stack_id);
    if (it == buffers[buffer].stacks.end())
      return fail(system_error(ENOENT, "cannot read stack " + std::to_string(stack_id)));
    return it->second;
  }

  Result<UnwoundStack> read_user_stack(int buffer, uint64_t hash) override
  {
    ++unwound_reads;
    auto it = buffers[buffer].unwound.find(hash);
    if (it == buffers[buffer].unwound.end())
      return fail(system_error(ENOENT, "cannot read unwound stack"));
    return UnwoundStack{it->second, buffers[buffer].cut[hash]};
  }

  Result<> clear_stacks(int buffer) override
  {
    cleared.push_back(buffer);
    buffers[buffer].stacks.clear();
    buffers[buffer].unwound.clear();
    return {};
  }

  Result<profile::DropCounters> read_counters() override
  {
    if (fail_counters)
      return fail(error("counters failed"));
    return totals;
  }

  // Reads of stack_id, in any buffer.
  size_t reads_of(int32_t stack_id) const
  {
    return std::count_if(stack_reads.begin(), stack_reads.end(),
                         [&](const auto& read) { return read.second == stack_id; });
  }

  Buffer buffers[FB_BUFFER_COUNT];
  int active = 0; // the buffer the "BPF program" writes
  profile::DropCounters totals;
  bool fail_switch = false;
  bool fail_counters = false;

  int switches = 0;
  int unwound_reads = 0;
  std::vector<int> taken;
  std::vector<int> cleared;
  std::vector<std::pair<int, int32_t>> stack_reads;
};

CountEntry entry(uint32_t tgid, int32_t kernel_stack, int32_t user_stack, uint64_t count)
{
  CountEntry e;
  e.key.tgid = tgid;
  e.key.kernel_stack_id = kernel_stack;
  e.key.user_stack_id = user_stack;
  e.count = count;
  return e;
}

const profile::RawSample* sample_of(const profile::RawProfile& raw, uint32_t tgid)
{
  for (const auto& sample : raw.samples) {
    if (sample.tgid == tgid)
      return &sample;
  }
  return nullptr;
}

TEST(Drainer, ReadsUnwoundUserStacksByHashOnceEach)
{
  FakeMaps maps;
  maps.buffers[0].stacks = {{1, {0xffffffff81000010}}, {7, {0x999000}}};
  maps.buffers[0].unwound = {{0xabc1, {0x401000, 0x402000, 0x403000}}};
  auto unwound = entry(10, 1, 0, 4);
  unwound.key.user_stack_hash = 0xabc1;
  auto also_unwound = entry(11, -EFAULT, 0, 2);
  also_unwound.key.user_stack_hash = 0xabc1;
  auto missing = entry(12, -EFAULT, 0, 1);
  missing.key.user_stack_hash = 0xdead; // dropped from the map: the stack is lost
  maps.buffers[0].counts = {unwound, also_unwound, missing, entry(13, -EFAULT, 7, 1)};
  Drainer drainer(maps);

  auto raw = drainer.drain();
  ASSERT_TRUE(raw.has_value()) << raw.error().message;
  EXPECT_EQ(sample_of(*raw, 10)->user_frames,
            (std::vector<uint64_t>{0x401000, 0x402000, 0x403000}));
  EXPECT_EQ(sample_of(*raw, 11)->user_frames, sample_of(*raw, 10)->user_frames);
  EXPECT_TRUE(sample_of(*raw, 12)->user_stack_lost);
  // A zero hash means the kernel's walker took the stack: read by its id, not its hash.
  EXPECT_EQ(sample_of(*raw, 13)->user_frames, (std::vector<uint64_t>{0x999000}));
  EXPECT_EQ(maps.unwound_reads, 2);
  EXPECT_EQ(maps.reads_of(0), 0u);
}

TEST(Drainer, MarksUnwoundStacksTheUnwinderCutShort)
{
  FakeMaps maps;
  maps.buffers[0].unwound = {{0xabc1, {0x401000, 0x402000}}, {0xabc3, {0x401000}}};
  maps.buffers[0].cut = {{0xabc3, true}};
  auto whole = entry(10, -EFAULT, 0, 4);
  whole.key.user_stack_hash = 0xabc1;
  auto cut = entry(11, -EFAULT, 0, 2);
  cut.key.user_stack_hash = 0xabc3;
  auto cut_again = entry(12, -EFAULT, 0, 1);
  cut_again.key.user_stack_hash = 0xabc3; // read once: the flag comes from the first read
  auto missing = entry(13, -EFAULT, 0, 1);
  missing.key.user_stack_hash = 0xdead; // lost, which is not cut
  maps.buffers[0].counts = {whole, cut, cut_again, missing};
  Drainer drainer(maps);

  auto raw = drainer.drain();
  ASSERT_TRUE(raw.has_value()) << raw.error().message;
  EXPECT_FALSE(sample_of(*raw, 10)->user_stack_cut);
  EXPECT_TRUE(sample_of(*raw, 11)->user_stack_cut);
  EXPECT_TRUE(sample_of(*raw, 12)->user_stack_cut);
  EXPECT_FALSE(sample_of(*raw, 13)->user_stack_cut);
  EXPECT_TRUE(sample_of(*raw, 13)->user_stack_lost);
  EXPECT_EQ(maps.unwound_reads, 3);
}

TEST(Drainer, ResolvesStackIdsToFramesReadingEachStackOnce)
{
  FakeMaps maps;
  maps.buffers[0].stacks = {{1, {0xffffffff81000010, 0xffffffff81000020}},
                            {2, {0x401000, 0x402000}}};
  auto with_target = entry(10, 1, 2, 5);
  with_target.key.target_cgroup_id = 4242;
  with_target.key.image_id = 3;
  maps.buffers[0].counts = {with_target, entry(11, 1, 2, 3), entry(12, 1, -EFAULT, 1)};
  Drainer drainer(maps);

  auto raw = drainer.drain();
  ASSERT_TRUE(raw.has_value()) << raw.error().message;
  ASSERT_EQ(raw->samples.size(), 3u);
  const auto* first = sample_of(*raw, 10);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->target_cgroup_id, 4242u);
  EXPECT_EQ(first->image_id, 3u);
  EXPECT_EQ(first->kernel_frames, (std::vector<uint64_t>{0xffffffff81000010, 0xffffffff81000020}));
  EXPECT_EQ(first->user_frames, (std::vector<uint64_t>{0x401000, 0x402000}));
  EXPECT_EQ(first->count, 5u);
  EXPECT_FALSE(first->kernel_stack_lost);
  EXPECT_FALSE(first->user_stack_lost);
  const auto* second = sample_of(*raw, 11);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->user_frames, first->user_frames);
  EXPECT_EQ(second->target_cgroup_id, 0u);
  EXPECT_EQ(second->count, 3u);

  EXPECT_EQ(maps.reads_of(1), 1u);
  EXPECT_EQ(maps.reads_of(2), 1u);
  EXPECT_EQ(maps.stack_reads.size(), 2u);
}

TEST(Drainer, EfaultMeansNoStackNotALostOne)
{
  FakeMaps maps;
  maps.buffers[0].stacks = {{7, {0x401000}}};
  // A user-mode sample (no kernel stack) and a kernel thread (no user stack).
  maps.buffers[0].counts = {entry(20, -EFAULT, 7, 4), entry(21, 7, -EFAULT, 2)};
  Drainer drainer(maps);

  auto raw = drainer.drain();
  ASSERT_TRUE(raw.has_value()) << raw.error().message;
  const auto* user_mode = sample_of(*raw, 20);
  ASSERT_NE(user_mode, nullptr);
  EXPECT_TRUE(user_mode->kernel_frames.empty());
  EXPECT_FALSE(user_mode->kernel_stack_lost);
  EXPECT_EQ(user_mode->user_frames, (std::vector<uint64_t>{0x401000}));
  const auto* kernel_thread = sample_of(*raw, 21);
  ASSERT_NE(kernel_thread, nullptr);
  EXPECT_TRUE(kernel_thread->user_frames.empty());
  EXPECT_FALSE(kernel_thread->user_stack_lost);
  // Negative ids are never looked up.
  EXPECT_EQ(maps.reads_of(-EFAULT), 0u);
}

TEST(Drainer, OtherErrorsAreLostStacks)
{
  FakeMaps maps;
  maps.buffers[0].stacks = {{3, {0x401000}}};
  maps.buffers[0].counts = {entry(30, -EEXIST, 3, 1), entry(31, 3, -ENOMEM, 1),
                            entry(32, -EEXIST, -ENOMEM, 1)};
  Drainer drainer(maps);

  auto raw = drainer.drain();
  ASSERT_TRUE(raw.has_value()) << raw.error().message;
  const auto* collision = sample_of(*raw, 30);
  ASSERT_NE(collision, nullptr);
  EXPECT_TRUE(collision->kernel_stack_lost);
  EXPECT_TRUE(collision->kernel_frames.empty());
  EXPECT_FALSE(collision->user_stack_lost);
  const auto* full = sample_of(*raw, 31);
  ASSERT_NE(full, nullptr);
  EXPECT_FALSE(full->kernel_stack_lost);
  EXPECT_TRUE(full->user_stack_lost);
  EXPECT_TRUE(full->user_frames.empty());
  const auto* both = sample_of(*raw, 32);
  ASSERT_NE(both, nullptr);
  EXPECT_TRUE(both->kernel_stack_lost);
  EXPECT_TRUE(both->user_stack_lost);
}

TEST(Drainer, UnreadableStackIdIsLost)
{
  FakeMaps maps;
  maps.buffers[0].counts = {entry(40, 99, 99, 1), entry(41, 99, -EFAULT, 1)};
  Drainer drainer(maps);

  auto raw = drainer.drain();
  ASSERT_TRUE(raw.has_value()) << raw.error().message;
  for (const auto& sample : raw->samples) {
    EXPECT_TRUE(sample.kernel_stack_lost) << sample.tgid;
    EXPECT_TRUE(sample.kernel_frames.empty()) << sample.tgid;
  }
  EXPECT_TRUE(sample_of(*raw, 40)->user_stack_lost);
  EXPECT_EQ(maps.reads_of(99), 1u); // a failed read is not retried within a drain either
}

TEST(Drainer, ReadsAndClearsTheIdleBufferOnly)
{
  FakeMaps maps;
  maps.buffers[0].stacks = {{1, {0xa0}}};
  maps.buffers[0].counts = {entry(50, -EFAULT, 1, 1)};
  maps.buffers[1].stacks = {{1, {0xb0}}};
  maps.buffers[1].counts = {entry(51, -EFAULT, 1, 2)};
  Drainer drainer(maps);

  auto first = drainer.drain();
  ASSERT_TRUE(first.has_value()) << first.error().message;
  EXPECT_EQ(maps.switches, 1);
  EXPECT_EQ(maps.taken, (std::vector<int>{0}));
  EXPECT_EQ(maps.cleared, (std::vector<int>{0}));
  ASSERT_EQ(first->samples.size(), 1u);
  EXPECT_EQ(first->samples[0].tgid, 50u);
  EXPECT_EQ(first->samples[0].user_frames, (std::vector<uint64_t>{0xa0}));
  EXPECT_TRUE(maps.buffers[0].stacks.empty());
  EXPECT_EQ(maps.buffers[1].stacks.size(), 1u); // the active buffer is left alone

  auto second = drainer.drain();
  ASSERT_TRUE(second.has_value()) << second.error().message;
  EXPECT_EQ(maps.switches, 2);
  EXPECT_EQ(maps.taken, (std::vector<int>{0, 1}));
  EXPECT_EQ(maps.cleared, (std::vector<int>{0, 1}));
  ASSERT_EQ(second->samples.size(), 1u);
  EXPECT_EQ(second->samples[0].tgid, 51u);
  EXPECT_EQ(second->samples[0].user_frames, (std::vector<uint64_t>{0xb0}));
  // Stack ids are per buffer: the same id read in the next drain is read again.
  EXPECT_EQ(maps.stack_reads, (std::vector<std::pair<int, int32_t>>{{0, 1}, {1, 1}}));
}

TEST(Drainer, CountersAreDeltasBetweenDrains)
{
  FakeMaps maps;
  maps.totals.counts[FB_COUNTER_SAMPLES] = 100;
  maps.totals.counts[FB_COUNTER_KSTACK_COLLISION] = 3;
  Drainer drainer(maps);

  auto first = drainer.drain();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->counters[FB_COUNTER_SAMPLES], 100u);
  EXPECT_EQ(first->counters[FB_COUNTER_KSTACK_COLLISION], 3u);

  maps.totals.counts[FB_COUNTER_SAMPLES] = 250;
  maps.totals.counts[FB_COUNTER_USTACK_COLLISION] = 4;
  auto second = drainer.drain();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->counters[FB_COUNTER_SAMPLES], 150u);
  EXPECT_EQ(second->counters[FB_COUNTER_KSTACK_COLLISION], 0u);
  EXPECT_EQ(second->counters[FB_COUNTER_USTACK_COLLISION], 4u);

  auto third = drainer.drain();
  ASSERT_TRUE(third.has_value());
  for (int counter = 0; counter < FB_COUNTER_MAX; ++counter)
    EXPECT_EQ(third->counters[counter], 0u) << counter;
}

TEST(Drainer, IntervalsAreContiguous)
{
  FakeMaps maps;
  Drainer drainer(maps);
  auto first = drainer.drain();
  auto second = drainer.drain();
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(second.has_value());
  EXPECT_LE(first->start, first->end);
  EXPECT_EQ(second->start, first->end);
  EXPECT_LE(second->start, second->end);
  EXPECT_TRUE(first->samples.empty());
}

TEST(Drainer, MapErrorsFailTheDrain)
{
  FakeMaps maps;
  maps.fail_switch = true;
  Drainer drainer(maps);
  auto raw = drainer.drain();
  ASSERT_FALSE(raw.has_value());
  EXPECT_EQ(raw.error().message, "switch failed");
  EXPECT_TRUE(maps.taken.empty());

  maps.fail_switch = false;
  maps.fail_counters = true;
  raw = drainer.drain();
  ASSERT_FALSE(raw.has_value());
  EXPECT_EQ(raw.error().message, "counters failed");
}

} // namespace
} // namespace flamebpf::drain
