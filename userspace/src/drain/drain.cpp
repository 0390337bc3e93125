#include "drain/drain.h"

#include <cerrno>
#include <unordered_map>

#include "common/log.h"

namespace flamebpf::drain {

// The layout is shared with the BPF program; a change on either side must show up here.
static_assert(sizeof(fb_sample_key) == 32);
static_assert(sizeof(fb_unwind_row) == 8);
static_assert(sizeof(fb_unwind_table) == 8);
static_assert(sizeof(fb_unwind_mapping) == 32);
static_assert(sizeof(fb_image_mappings) == 8 + 32 * FB_MAX_IMAGE_MAPPINGS);
static_assert(sizeof(fb_user_stack) == 8 + 8 * FB_MAX_STACK_DEPTH);
static_assert(sizeof(fb_process_notice) == 48);
static_assert(sizeof(fb_image_key) == 8);

Drainer::Drainer(MapReader& maps) : maps_(maps), interval_start_(std::chrono::system_clock::now())
{
}

Result<profile::RawProfile> Drainer::drain()
{
  profile::RawProfile raw;
  raw.start = interval_start_;
  auto idle = maps_.switch_buffer();
  raw.end = std::chrono::system_clock::now();
  interval_start_ = raw.end;
  if (!idle)
    return fail(idle.error());

  auto counts = maps_.take_counts(*idle);
  if (!counts)
    return fail(counts.error());

  // Many samples share a stack; read each stack once, from whichever map holds it.
  auto read_once = [](auto& cache, auto key, auto read, bool& lost) -> std::vector<uint64_t> {
    auto [it, inserted] = cache.try_emplace(key);
    if (inserted) {
      auto frames = read(key);
      if (frames)
        it->second = std::move(*frames);
      else
        spdlog::debug("{}", frames.error().message);
    }
    lost = it->second.empty();
    return it->second;
  };
  std::unordered_map<int32_t, std::vector<uint64_t>> stacks;
  auto frames_of = [&](int32_t stack_id, bool& lost) -> std::vector<uint64_t> {
    if (stack_id < 0) {
      // -EFAULT means "no such stack" (user mode for the kernel stack, a kernel thread for the
      // user stack); any other error is a stack the kernel could not keep.
      lost = stack_id != -EFAULT;
      return {};
    }
    return read_once(
        stacks, stack_id, [&](int32_t id) { return maps_.read_stack(*idle, id); }, lost);
  };
  std::unordered_map<uint64_t, std::vector<uint64_t>> unwound;
  std::unordered_map<uint64_t, bool> unwound_cut;
  auto frames_unwound = [&](uint64_t hash, bool& lost, bool& cut) -> std::vector<uint64_t> {
    auto read = [&](uint64_t key) -> Result<std::vector<uint64_t>> {
      auto stack = maps_.read_user_stack(*idle, key);
      if (!stack)
        return fail(stack.error());
      unwound_cut[key] = stack->cut;
      return std::move(stack->frames);
    };
    auto frames = read_once(unwound, hash, read, lost);
    cut = !lost && unwound_cut[hash];
    return frames;
  };

  raw.samples.reserve(counts->size());
  for (const auto& entry : *counts) {
    profile::RawSample sample;
    sample.tgid = entry.key.tgid;
    sample.image_id = entry.key.image_id;
    sample.target_cgroup_id = entry.key.target_cgroup_id;
    sample.kernel_frames = frames_of(entry.key.kernel_stack_id, sample.kernel_stack_lost);
    sample.user_frames = entry.key.user_stack_hash != 0
                             ? frames_unwound(entry.key.user_stack_hash, sample.user_stack_lost,
                                              sample.user_stack_cut)
                             : frames_of(entry.key.user_stack_id, sample.user_stack_lost);
    sample.count = entry.count;
    raw.samples.push_back(std::move(sample));
  }
  if (auto cleared = maps_.clear_stacks(*idle); !cleared)
    return fail(cleared.error());

  auto totals = maps_.read_counters();
  if (!totals)
    return fail(totals.error());
  for (size_t i = 0; i < raw.counters.counts.size(); ++i)
    raw.counters.counts[i] = totals->counts[i] - counters_at_last_drain_.counts[i];
  counters_at_last_drain_ = *totals;
  return raw;
}

} // namespace flamebpf::drain
