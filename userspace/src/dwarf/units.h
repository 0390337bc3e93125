// Walking .debug_info unit by unit: UnitWalk reads each unit's initial length from the section's
// stream (section_stream.h) and then, if the reader wants it, the unit's bytes; read_unit_header
// reads what follows the length. What a unit holds is the reader's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "common/byte_cursor.h"
#include "dwarf/forms.h"

namespace flamebpf::dwarf {

// Where a unit lies in .debug_info.
struct UnitExtent {
  uint64_t offset = 0;     // of its initial length
  size_t header_size = 0;  // bytes of the initial length: 4, or 12 in 64-bit DWARF
  uint64_t length = 0;     // bytes after them
  uint8_t offset_size = 4; // 8 in 64-bit DWARF
  uint64_t end() const { return offset + header_size + length; }
};

// Why a walk stopped.
enum class WalkEnd {
  kNone,      // it has not
  kEnded,     // the section ended where a unit would begin
  kMalformed, // a length no unit can have: nothing after it can be found
  kCut,       // the section ended inside a unit
  kFailed,    // the stream could not be read (error() says why)
};

// Stream: SectionStream, or anything with its pull(out, count) and skip(count).
template <class Stream> class UnitWalk {
public:
  explicit UnitWalk(Stream& stream) : stream_(stream) {}

  // Reads the next unit's initial length into unit (emptied first); nullopt once the walk ends.
  std::optional<UnitExtent> next(std::string& unit)
  {
    unit.clear();
    auto got = stream_.pull(unit, 4);
    if (!got)
      return stop(WalkEnd::kFailed, got.error().message);
    if (*got == 0)
      return stop(WalkEnd::kEnded);
    UnitExtent extent;
    extent.offset = offset_;
    ByteCursor head(unit);
    extent.length = head.fixed(4);
    if (head.ok() && extent.length == 0xffffffff) {
      auto more = stream_.pull(unit, 8);
      head = ByteCursor(unit, head.position());
      extent.length = head.fixed(8);
      extent.offset_size = 8;
      if (!more || !head.ok())
        return stop(WalkEnd::kCut);
    } else if (!head.ok() || extent.length >= 0xfffffff0) {
      return stop(WalkEnd::kMalformed); // reserved lengths
    }
    if (extent.length < 2)
      return stop(WalkEnd::kMalformed); // not even a version: zeros or garbage
    extent.header_size = unit.size();
    offset_ = extent.end();
    return extent;
  }

  // Appends the unit's bytes after its initial length to unit; false if the walk ends instead.
  bool read(std::string& unit, const UnitExtent& extent)
  {
    auto got = stream_.pull(unit, extent.length);
    if (!got)
      return stop(WalkEnd::kFailed, got.error().message).has_value();
    if (*got < extent.length)
      return stop(WalkEnd::kCut).has_value();
    return true;
  }

  // Passes over the unit's bytes; false if the walk ends instead.
  bool skip(const UnitExtent& extent)
  {
    auto passed = stream_.skip(extent.length);
    if (!passed)
      return stop(WalkEnd::kFailed, passed.error().message).has_value();
    if (*passed < extent.length)
      return stop(WalkEnd::kCut).has_value();
    return true;
  }

  WalkEnd end() const { return end_; }
  const std::string& error() const { return error_; }

private:
  std::optional<UnitExtent> stop(WalkEnd end, std::string error = {})
  {
    end_ = end;
    error_ = std::move(error);
    return std::nullopt;
  }

  Stream& stream_;
  uint64_t offset_ = 0;
  WalkEnd end_ = WalkEnd::kNone;
  std::string error_;
};

// What a unit's header says of it.
enum class UnitKind {
  kCode,        // a compile or partial unit: its DIEs describe code
  kTypes,       // type units: no code
  kSplit,       // skeleton and split units, whose DIEs are in a .dwo file
  kUnsupported, // a version or unit type this reader does not know
  kMalformed,   // the header runs off the unit or states an address size no target has
};

struct UnitHeader {
  UnitKind kind = UnitKind::kMalformed;
  Unit unit;                  // offset, version, offset and address sizes
  uint64_t abbrev_offset = 0; // of its abbreviation table in .debug_abbrev
  size_t dies_at = 0;         // where its first DIE is in the unit's bytes
};

// Reads the header of the unit whose bytes (its initial length first) are unit_bytes.
UnitHeader read_unit_header(std::string_view unit_bytes, const UnitExtent& extent);

} // namespace flamebpf::dwarf
