// The sampling program's event counts, as every stage after the sampler carries them. Indexed by
// the ids of event_counters.h only: the BPF ABI's structs stay with the sampler and the drain.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "event_counters.h"

namespace flamebpf::profile {

// Counts of the BPF program's events over one interval, summed over CPUs (index FB_COUNTER_*).
struct DropCounters {
  std::array<uint64_t, FB_COUNTER_MAX> counts{};

  uint64_t operator[](int counter) const { return counts.at(counter); }
  DropCounters& operator+=(const DropCounters& other)
  {
    for (size_t i = 0; i < counts.size(); ++i)
      counts[i] += other.counts[i];
    return *this;
  }
};

} // namespace flamebpf::profile
