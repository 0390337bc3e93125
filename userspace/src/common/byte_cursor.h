// Little-endian reads from bytes a target wrote (DWARF sections, .eh_frame), one rule for every
// reader: a read past the end, or a number that does not fit 64 bits, yields 0 and clears ok()
// for good, so that callers check once after a group of reads. LEB128 numbers may be padded (as
// linkers pad them) as long as the padding says nothing past bit 63.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <type_traits>

namespace flamebpf {

class ByteCursor {
public:
  // Reads bytes from position up to end (clamped to the bytes).
  explicit ByteCursor(std::string_view bytes,
                      size_t position = 0,
                      size_t end = std::string_view::npos)
      : bytes_(bytes), position_(position), end_(std::min(end, bytes.size()))
  {
    if (position_ > end_) {
      ok_ = false;
      position_ = end_;
    }
  }

  bool ok() const { return ok_; }
  size_t position() const { return position_; }
  size_t end() const { return end_; }
  bool at_end() const { return position_ >= end_; }

  template <class T> T fixed()
  {
    static_assert(std::is_integral_v<T>);
    T value{};
    if (take(sizeof value))
      std::memcpy(&value, bytes_.data() + position_ - sizeof value, sizeof value);
    return value;
  }
  uint8_t byte() { return fixed<uint8_t>(); }
  // An unsigned number of size bytes (1 to 8), as DWARF's forms of sizes its header gives.
  uint64_t fixed(size_t size)
  {
    if (size == 0 || size > 8) {
      fail();
      return 0;
    }
    if (!take(size))
      return 0;
    uint64_t value = 0;
    for (size_t i = 0; i < size; ++i)
      value |= uint64_t{static_cast<unsigned char>(bytes_[position_ - size + i])} << (8 * i);
    return value;
  }

  uint64_t uleb()
  {
    uint64_t value = 0;
    for (unsigned shift = 0;; shift += 7) {
      uint8_t part = byte();
      if (!ok_)
        return 0;
      uint8_t payload = part & 0x7f;
      // Bits of this byte past bit 63 must be zero.
      if (shift >= 64 ? payload != 0 : shift > 57 && (payload >> (64 - shift)) != 0)
        return fail();
      if (shift < 64)
        value |= uint64_t{payload} << shift;
      if (!(part & 0x80))
        return value;
    }
  }

  int64_t sleb()
  {
    uint64_t value = 0;
    unsigned shift = 0;
    uint8_t part = 0;
    do {
      part = byte();
      if (!ok_)
        return 0;
      uint8_t payload = part & 0x7f;
      if (shift < 64) {
        value |= uint64_t{payload} << shift;
        // Bits of this byte past bit 63 must repeat the sign (bit 63).
        if (shift > 57) {
          unsigned kept = 64 - shift;
          uint8_t past = payload >> kept;
          uint8_t sign = (payload >> (kept - 1)) & 1;
          if (past != (sign ? 0x7f >> kept : 0))
            return static_cast<int64_t>(fail());
        }
      } else if (payload != ((value >> 63) ? 0x7f : 0)) {
        return static_cast<int64_t>(fail());
      }
      shift += 7;
    } while (part & 0x80);
    if (shift < 64 && (part & 0x40))
      value |= ~uint64_t{0} << shift;
    return static_cast<int64_t>(value);
  }

  // A NUL-terminated string; without its NUL before the end, "" and not ok.
  std::string_view string()
  {
    if (!ok_)
      return {};
    size_t nul = bytes_.find('\0', position_);
    if (nul == std::string_view::npos || nul >= end_) {
      fail();
      return {};
    }
    std::string_view text = bytes_.substr(position_, nul - position_);
    position_ = nul + 1;
    return text;
  }

  // length bytes, passed over; their view.
  std::string_view block(uint64_t length)
  {
    if (!take(length))
      return {};
    return bytes_.substr(position_ - length, length);
  }
  void skip(uint64_t length) { take(length); }

private:
  bool take(uint64_t length)
  {
    if (!ok_ || length > end_ - position_) {
      fail();
      return false;
    }
    position_ += length;
    return true;
  }
  uint64_t fail()
  {
    ok_ = false;
    position_ = end_;
    return 0;
  }

  std::string_view bytes_;
  size_t position_;
  size_t end_;
  bool ok_ = true;
};

} // namespace flamebpf
