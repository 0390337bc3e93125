// Reading a DWARF section of an ELF file in bounded steps: SectionStream hands out its bytes in
// order, Window a moving view of them from an offset on. Compressed sections (SHF_COMPRESSED with
// zlib, or the older .zdebug_ form) are inflated on the way; neither ever holds the whole section.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <elf.h>
#include <string>
#include <string_view>
#include <zlib.h>

#include "common/byte_cursor.h"
#include "common/elf_reader.h"
#include "common/result.h"
#include "dwarf/constants.h"

namespace flamebpf::dwarf {

// A window over a side section holds at most this much besides the bytes asked for at once.
inline constexpr size_t kMaxWindowBytes = 1 << 20;
// Files are read, and compressed sections inflated, this much at a time.
inline constexpr size_t kReadStep = 256 << 10;
// What one open stream holds besides what it hands out: its read buffer and zlib's state and
// 32 KiB window.
inline constexpr size_t kStreamBytes = kReadStep + (64 << 10);
// A window is first asked for this much, then more while what it read ran off its end.
inline constexpr size_t kFirstView = 4096;
// A section's bytes in order: read in steps with pread (through ElfReader), inflated on the way
// if compressed (SHF_COMPRESSED with zlib, or the older .zdebug_ form), never more than its
// budget. Not movable: zlib's stream keeps a pointer to itself.
class SectionStream {
public:
  SectionStream() = default;
  SectionStream(const SectionStream&) = delete;
  SectionStream& operator=(const SectionStream&) = delete;
  ~SectionStream()
  {
    if (inflating_)
      inflateEnd(&zlib_);
  }

  // Prepares to read section; an error says why it cannot be (its message names the section).
  [[nodiscard]] Result<> open(const ElfReader& reader, const ElfSection& section, uint64_t budget)
  {
    reader_ = &reader;
    section_ = section;
    if (section.type == SHT_NOBITS)
      return fail(error(section.name + " has no content in the file"));
    uint64_t raw_start = 0;
    declared_ = section.size;
    if (section.name.starts_with(".zdebug_")) {
      // "ZLIB" and the inflated size, big-endian.
      auto head = read_raw(0, 12);
      if (!head)
        return fail(head.error());
      if (head->compare(0, 4, "ZLIB") != 0)
        return fail(error(section.name + " is not zlib-compressed"));
      declared_ = 0;
      for (size_t i = 4; i < 12; ++i)
        declared_ = declared_ << 8 | static_cast<unsigned char>((*head)[i]);
      raw_start = 12;
      compressed_ = true;
    } else if (section.flags & SHF_COMPRESSED) {
      size_t header_size = reader.is_64() ? sizeof(Elf64_Chdr) : sizeof(Elf32_Chdr);
      auto head = read_raw(0, header_size);
      if (!head)
        return fail(head.error());
      uint32_t type = 0;
      if (reader.is_64()) {
        Elf64_Chdr header;
        std::memcpy(&header, head->data(), sizeof header);
        type = header.ch_type;
        declared_ = header.ch_size;
      } else {
        Elf32_Chdr header;
        std::memcpy(&header, head->data(), sizeof header);
        type = header.ch_type;
        declared_ = header.ch_size;
      }
      if (type == kCompressZstd)
        return fail(error(section.name + " is zstd-compressed, which is not read"));
      if (type != ELFCOMPRESS_ZLIB)
        return fail(
            error(section.name + " has an unknown compression (" + std::to_string(type) + ")"));
      raw_start = header_size;
      compressed_ = true;
    }
    raw_at_ = raw_start;
    limit_ = std::min(declared_, budget);
    if (compressed_) {
      if (inflateInit(&zlib_) != Z_OK)
        return fail(error("cannot start inflating " + section.name));
      inflating_ = true;
    }
    return {};
  }

  // The size the section states for its content (inflated), which may exceed the budget.
  uint64_t declared_size() const { return declared_; }
  // Whether the budget is below the stated size.
  bool cut_by_budget() const { return declared_ > limit_; }
  // Bytes of content passed so far.
  uint64_t position() const { return produced_; }

  // Appends the next count bytes (fewer at the end) to out; returns how many.
  [[nodiscard]] Result<size_t> pull(std::string& out, uint64_t count)
  {
    uint64_t wanted = std::min(count, limit_ - produced_);
    size_t start = out.size();
    while (out.size() - start < wanted) {
      size_t step =
          static_cast<size_t>(std::min<uint64_t>(wanted - (out.size() - start), kReadStep));
      auto got = next(out, step);
      if (!got)
        return fail(got.error());
      if (*got == 0)
        break;
    }
    return out.size() - start;
  }

  // Passes over the next count bytes (fewer at the end); returns how many.
  [[nodiscard]] Result<uint64_t> skip(uint64_t count)
  {
    uint64_t wanted = std::min(count, limit_ - produced_);
    if (!compressed_) {
      produced_ += wanted;
      return wanted;
    }
    uint64_t passed = 0;
    std::string scratch;
    while (passed < wanted) {
      scratch.clear();
      auto got = next(scratch, static_cast<size_t>(std::min<uint64_t>(wanted - passed, kReadStep)));
      if (!got)
        return fail(got.error());
      if (*got == 0)
        break;
      passed += *got;
    }
    return passed;
  }

private:
  Result<std::string> read_raw(uint64_t at, size_t length) const
  {
    if (at > section_.size || section_.size - at < length)
      return fail(error(section_.name + " ends early"));
    // A window of the section, so that ElfReader's pread (with its checks) does the reading.
    ElfSection window = section_;
    window.type = SHT_PROGBITS;
    window.offset = section_.offset + at;
    window.size = length;
    if (window.offset < section_.offset)
      return fail(error(section_.name + " lies past the end of the file"));
    auto content = reader_->read_section(window, length);
    if (!content)
      return fail(content.error());
    return std::move(content->bytes);
  }

  // Appends up to count bytes to out, at least one unless the content ended.
  Result<size_t> next(std::string& out, size_t count)
  {
    if (!compressed_) {
      auto bytes = read_raw(produced_, count);
      if (!bytes)
        return fail(bytes.error());
      out += *bytes;
      produced_ += count;
      return count;
    }
    if (ended_)
      return 0;
    size_t start = out.size();
    out.resize(start + count);
    zlib_.next_out = reinterpret_cast<Bytef*>(out.data() + start);
    zlib_.avail_out = static_cast<uInt>(count);
    while (zlib_.avail_out > 0 && !ended_) {
      if (zlib_.avail_in == 0) {
        uint64_t left = section_.size - std::min(section_.size, raw_at_);
        if (left == 0) {
          out.resize(start + (count - zlib_.avail_out));
          return fail(error(section_.name + " ends inside its compressed data"));
        }
        auto raw = read_raw(raw_at_, static_cast<size_t>(std::min<uint64_t>(left, kReadStep)));
        if (!raw) {
          out.resize(start + (count - zlib_.avail_out));
          return fail(raw.error());
        }
        raw_ = std::move(*raw);
        raw_at_ += raw_.size();
        zlib_.next_in = reinterpret_cast<Bytef*>(raw_.data());
        zlib_.avail_in = static_cast<uInt>(raw_.size());
      }
      int status = inflate(&zlib_, Z_NO_FLUSH);
      if (status == Z_STREAM_END) {
        ended_ = true;
      } else if (status != Z_OK) {
        out.resize(start + (count - zlib_.avail_out));
        return fail(
            error(section_.name + " does not inflate (zlib " + std::to_string(status) + ")"));
      }
    }
    size_t got = count - zlib_.avail_out;
    out.resize(start + got);
    produced_ += got;
    return got;
  }

  const ElfReader* reader_ = nullptr;
  ElfSection section_;
  bool compressed_ = false;
  bool inflating_ = false;
  bool ended_ = false;
  z_stream zlib_{};
  std::string raw_;
  uint64_t raw_at_ = 0;
  uint64_t declared_ = 0;
  uint64_t limit_ = 0;
  uint64_t produced_ = 0;
};

// A side section read forward through a window: bytes from an offset on are pulled (pread, or
// inflated) on demand and dropped once behind; going back starts the stream again, which costs
// a compressed section a new inflate from its start, so callers ask in rising order where they can.
class Window {
public:
  // Prepares to read section, of at most limit bytes; an error if it cannot be.
  [[nodiscard]] Result<> open(const ElfReader& reader, const ElfSection& section, uint64_t limit)
  {
    reader_ = &reader;
    section_ = section;
    limit_ = limit;
    return restart();
  }
  bool is_open() const { return stream_ != nullptr; }

  // The bytes from offset on, length of them or fewer where the section ends. Everything since
  // the last release() stays, so that steps back within one unit's lists (not in the order of
  // its DIEs) cost no restart.
  [[nodiscard]] Result<std::string_view> view(uint64_t offset, size_t length)
  {
    if (!stream_)
      return std::string_view{};
    if (offset < base_) {
      if (auto restarted = restart(); !restarted)
        return fail(restarted.error());
    }
    uint64_t end = base_ + bytes_.size();
    if (offset >= end) {
      bytes_.clear();
      auto skipped = stream_->skip(offset - end);
      if (!skipped)
        return fail(skipped.error());
      base_ = end + *skipped;
      if (base_ < offset)
        return std::string_view{};
    }
    high_ = std::max(high_, offset);
    auto at = static_cast<size_t>(offset - base_);
    size_t have = bytes_.size() - at;
    if (have < length) {
      // Grows by doubling up to the window's bound, then only as asked.
      size_t need = bytes_.size() + (length - have);
      if (need > bytes_.capacity())
        bytes_.reserve(std::max(need, std::min(2 * bytes_.size(), kMaxWindowBytes)));
      auto got = stream_->pull(bytes_, length - have);
      if (!got)
        return fail(got.error());
    }
    return std::string_view(bytes_).substr(at, length);
  }

  // Drops the bytes before the furthest offset asked for: the next unit's lists follow this one's.
  void release()
  {
    if (high_ <= base_)
      return;
    bytes_.erase(0, static_cast<size_t>(std::min<uint64_t>(high_ - base_, bytes_.size())));
    base_ = high_;
    if (bytes_.capacity() > 2 * kMaxWindowBytes)
      bytes_.shrink_to_fit();
  }

  // What it holds now.
  size_t held() const { return stream_ ? bytes_.capacity() + kStreamBytes : 0; }

private:
  Result<> restart()
  {
    stream_ = std::make_unique<SectionStream>();
    bytes_.clear();
    base_ = 0;
    high_ = 0;
    if (auto opened = stream_->open(*reader_, section_, limit_); !opened) {
      stream_.reset();
      return fail(opened.error());
    }
    return {};
  }

  const ElfReader* reader_ = nullptr;
  ElfSection section_;
  uint64_t limit_ = 0;
  std::unique_ptr<SectionStream> stream_;
  std::string bytes_;
  uint64_t base_ = 0; // where bytes_ starts in the section's (inflated) content
  uint64_t high_ = 0; // the furthest offset asked for
};

} // namespace flamebpf::dwarf
