// Placement of unwind tables in the sampler's one array of rows: which rows each table holds, and
// which are free. Plain bookkeeping, no I/O.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

namespace flamebpf::unwind {

class RowSpace {
public:
  // capacity rows, all free.
  explicit RowSpace(uint32_t capacity);

  // The first row of count consecutive free rows, now taken; nullopt if no free run is that long
  // (or count is 0). First fit, lowest address: tables freed and taken again reuse the front.
  std::optional<uint32_t> take(uint32_t count);
  // Gives back the count rows from first, which take() returned; they merge with free neighbours.
  void give_back(uint32_t first, uint32_t count);

  uint32_t capacity() const { return capacity_; }
  // Rows taken now.
  uint32_t used() const { return used_; }
  // The longest run that take() could place now.
  uint32_t largest_free() const;
  // Free runs now (what the bookkeeping holds).
  size_t free_runs() const { return free_.size(); }

private:
  uint32_t capacity_;
  uint32_t used_ = 0;
  std::map<uint32_t, uint32_t> free_; // first row -> length; runs neither overlap nor touch
};

} // namespace flamebpf::unwind
