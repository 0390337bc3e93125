// Plain data leaving the drain stage: addresses, not names.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "profile/drop_counters.h"

namespace flamebpf::profile {

// One distinct stack of one process, as counted in the kernel.
struct RawSample {
  uint32_t tgid = 0;                   // host pid
  uint32_t image_id = 0;               // the process image (changes at exec), as BPF saw it
  uint64_t target_cgroup_id = 0;       // cgroup id of the matched --cgroup target, else 0
  std::vector<uint64_t> kernel_frames; // innermost first, as the kernel records them
  std::vector<uint64_t> user_frames;   // innermost first
  bool kernel_stack_lost = false;      // the kernel stack existed but could not be stored
  bool user_stack_lost = false;        // the user stack existed but could not be stored
  bool user_stack_cut = false;         // the unwinder stopped before the outermost frame
  uint64_t count = 0;                  // samples
};

// Everything sampled over one interval.
struct RawProfile {
  std::chrono::system_clock::time_point start;
  std::chrono::system_clock::time_point end;
  std::vector<RawSample> samples;
  DropCounters counters;
};

} // namespace flamebpf::profile
