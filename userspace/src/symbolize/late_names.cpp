#include "symbolize/late_names.h"

namespace flamebpf::symbolize {

uint32_t LateFrames::note(const ImageKey& image,
                          uint64_t address,
                          const std::shared_ptr<const ElfSymbols>& symbols,
                          uint64_t file_offset)
{
  Where where{(uint64_t{image.pid} << 32) | image.image_id, address};
  if (auto known = numbers_.find(where); known != numbers_.end())
    return known->second;
  // Numbers are not reused: an agent that notes a thousand new frames a minute runs eight years
  // before they run out, and then names no frame again.
  if (entries_.size() >= kMaxFrames || next_ == 0)
    return 0;
  uint32_t number = next_++;
  numbers_.emplace(where, number);
  entries_.emplace(number, Entry{image, address, symbols, file_offset});
  return number;
}

const LateFrames::Entry* LateFrames::find(uint32_t number) const
{
  auto it = entries_.find(number);
  return it == entries_.end() ? nullptr : &it->second;
}

bool LateFrames::awaits_inlines() const
{
  for (const auto& [number, entry] : entries_) {
    if (auto symbols = entry.symbols.lock(); symbols && symbols->inlines_pending())
      return true;
  }
  return false;
}

void LateFrames::clear()
{
  numbers_.clear();
  entries_.clear();
}

} // namespace flamebpf::symbolize
