// Sums symbolized intervals into one profile, merging equal stacks.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "profile/symbolized_profile.h"

namespace flamebpf::profile {

class Accumulator {
public:
  // Adds interval's stacks and counters; the result spans from the first start to the last end.
  void add(SymbolizedProfile interval);
  const SymbolizedProfile& total() const { return total_; }
  // About what the distinct stacks held take in memory, their index included: what a caller
  // with a budget compares.
  size_t held_bytes() const { return held_bytes_; }
  // The total so far; the accumulator starts empty again.
  SymbolizedProfile take();

private:
  SymbolizedProfile total_;
  bool empty_ = true;
  // A hash of each stack's identity -> its position in total_.stacks.
  std::unordered_multimap<uint64_t, size_t> index_;
  size_t held_bytes_ = 0;
};

} // namespace flamebpf::profile
