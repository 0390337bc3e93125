// Frames named incompletely when their interval was symbolized: code of an ELF file whose symbols,
// debug file or inline index had not arrived yet, or a JIT's code its perf map or records did not
// hold yet. Each is given a number, kept in its Frame (profile::Frame::late), and what names it
// again is kept here: the process image and the address, and the file's symbols (while the ELF
// cache holds them) with the byte's offset in the file, for a process that exited meanwhile. A
// profile is named again from whatever arrived before it is written (Symbolizer::name_late).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "symbolize/elf_symbols.h"
#include "symbolize/process_table.h"

namespace flamebpf::symbolize {

class LateFrames {
public:
  struct Entry {
    ImageKey image;
    uint64_t address = 0; // in the process, as symbolized (a call site)
    // The file's symbols as found, and the byte's offset in the file; none for code no file holds.
    // Not held: what the ELF cache lets go (its budget) is not kept alive here.
    std::weak_ptr<const ElfSymbols> symbols;
    uint64_t file_offset = 0;
  };

  // The number of the frame at address in image (the same for every stack that holds it); 0,
  // which marks a final frame, when kMaxFrames are held.
  uint32_t note(const ImageKey& image,
                uint64_t address,
                const std::shared_ptr<const ElfSymbols>& symbols = nullptr,
                uint64_t file_offset = 0);
  // The frame numbered number, if it is still held.
  const Entry* find(uint32_t number) const;
  // Forgets every frame: their numbers are never given again, so a profile that still holds one
  // finds nothing for it.
  void clear();
  size_t size() const { return entries_.size(); }
  // Whether a frame held waits for its file's inline index, still being built.
  bool awaits_inlines() const;

  // Frames held at most (about 100 bytes each): a recording's distinct unnamed addresses, far
  // beyond a real one's.
  static constexpr size_t kMaxFrames = 1 << 16;

private:
  struct Where {
    uint64_t image; // pid and image id
    uint64_t address;
    friend bool operator==(const Where&, const Where&) = default;
  };
  struct WhereHash {
    size_t operator()(const Where& where) const
    {
      return std::hash<uint64_t>()(where.image * 0x9e3779b97f4a7c15ULL ^ where.address);
    }
  };
  std::unordered_map<Where, uint32_t, WhereHash> numbers_;
  std::unordered_map<uint32_t, Entry> entries_;
  uint32_t next_ = 1;
};

} // namespace flamebpf::symbolize
