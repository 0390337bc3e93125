// The drain stage's view of the sampler's BPF maps, as an interface so that drain logic can be
// tested against in-memory maps.
#pragma once

#include <cstdint>
#include <vector>

#include "bpf_abi.h"
#include "common/result.h"
#include "profile/raw_profile.h"

namespace flamebpf::drain {

// A user stack the program unwound itself.
struct UnwoundStack {
  std::vector<uint64_t> frames; // innermost first
  bool cut = false;             // the unwinder stopped before the outermost frame
};

// One entry of a count map.
struct CountEntry {
  fb_sample_key key{};
  uint64_t count = 0;
};

class MapReader {
public:
  virtual ~MapReader() = default;

  // Makes the other buffer the one the BPF program writes, waits until no CPU still writes the
  // previous one, and returns the index of that previous, now idle, buffer.
  [[nodiscard]] virtual Result<int> switch_buffer() = 0;
  // Reads and removes every entry of buffer's count map.
  [[nodiscard]] virtual Result<std::vector<CountEntry>> take_counts(int buffer) = 0;
  // Frame addresses of stack_id in buffer's stack map, innermost first.
  [[nodiscard]] virtual Result<std::vector<uint64_t>> read_stack(int buffer, int32_t stack_id) = 0;
  // The stack the program unwound itself, by its hash, in buffer's unwound-stack map.
  [[nodiscard]] virtual Result<UnwoundStack> read_user_stack(int buffer, uint64_t hash) = 0;
  // Removes every stack of buffer's stack maps (both kinds).
  [[nodiscard]] virtual Result<> clear_stacks(int buffer) = 0;
  // Event counter totals since the program was loaded, summed over CPUs.
  [[nodiscard]] virtual Result<profile::DropCounters> read_counters() = 0;
};

} // namespace flamebpf::drain
