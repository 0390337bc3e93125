// What a parse read of one file: the byte ranges, in the order first read, and a keyed hash of
// their bytes. Bytes read again are recorded once: a parse that reads through overlapping windows
// costs its record what it covered, not what it read. A parse whose only input is the file's bytes
// (through ElfBytes) and its size reads the same ranges of any file that holds the same bytes
// there, and makes the same result: so another file of that size whose recorded ranges hash the
// same is a copy as far as the parse can tell, and can share what the parse built without being
// parsed. Copies of one library in many containers' images are each a file of their own to the
// kernel; checking one costs reading what the parse read, not decoding it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string_view>
#include <vector>

#include "common/hashing.h"

namespace flamebpf {

class ReadRecord {
public:
  // A record of reads of a file of file_size bytes.
  explicit ReadRecord(uint64_t file_size) : file_size_(file_size), hash_(content_hash_key()) {}

  // The parse read bytes at offset.
  void add(uint64_t offset, std::string_view bytes);
  // The parse is done: nothing is added from now on.
  void seal();
  // The parse took something besides the file's bytes: the record replays on nothing, and
  // records nothing more.
  void drop();

  // Whether the file fd, of size bytes, holds at the recorded ranges what the recorded file held,
  // read again the same way. False for a record of too many ranges, one dropped, or one not
  // sealed.
  bool replays_on(int fd, uint64_t size) const;

  // Sealed and not dropped: what replays_on can match.
  bool usable() const { return sealed_ && !dropped_; }
  uint64_t file_size() const { return file_size_; }
  // The bytes replays_on reads.
  uint64_t bytes_read() const { return bytes_read_; }
  // The memory the record holds.
  size_t memory_bytes() const
  {
    // A map node holds its pair beside three pointers and a colour.
    return sizeof *this + ranges_.capacity() * sizeof(Range) +
           covered_.size() * (sizeof(Range) + 4 * sizeof(void*));
  }

  // Ranges past this many (reads that neither follow one another nor fall in what was read
  // before) make a record that replays on nothing: a parse that jumps about is not worth
  // checking this way.
  static constexpr size_t kMaxRanges = 1024;

private:
  struct Range {
    uint64_t offset;
    uint64_t length;
  };
  // Records the bytes at offset that no earlier read covered.
  void add_new(uint64_t offset, std::string_view bytes);

  uint64_t file_size_;
  std::vector<Range> ranges_;
  // What the ranges cover, merged: start to end.
  std::map<uint64_t, uint64_t> covered_;
  uint64_t bytes_read_ = 0;
  SipHash hash_;
  uint64_t digest_ = 0;
  bool sealed_ = false;
  bool dropped_ = false; // by drop(), or for too many ranges
};

} // namespace flamebpf
