#include "unwind/row_space.h"

#include <algorithm>
#include <iterator>

namespace flamebpf::unwind {

RowSpace::RowSpace(uint32_t capacity) : capacity_(capacity)
{
  if (capacity > 0)
    free_.emplace(0, capacity);
}

std::optional<uint32_t> RowSpace::take(uint32_t count)
{
  if (count == 0)
    return std::nullopt;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    auto [first, length] = *it;
    if (length < count)
      continue;
    free_.erase(it);
    if (length > count)
      free_.emplace(first + count, length - count);
    used_ += count;
    return first;
  }
  return std::nullopt;
}

void RowSpace::give_back(uint32_t first, uint32_t count)
{
  if (count == 0)
    return;
  used_ -= std::min(used_, count);
  auto next = free_.lower_bound(first);
  if (next != free_.end() && first + count == next->first) {
    count += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto previous = std::prev(next);
    if (previous->first + previous->second == first) {
      previous->second += count;
      return;
    }
  }
  free_.emplace(first, count);
}

uint32_t RowSpace::largest_free() const
{
  uint32_t largest = 0;
  for (const auto& [first, length] : free_)
    largest = std::max(largest, length);
  return largest;
}

} // namespace flamebpf::unwind
