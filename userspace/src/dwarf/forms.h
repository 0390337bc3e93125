// An attribute's value as its form encodes it (DWARF 5, section 7.5.6), decoded within its unit.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/byte_cursor.h"

namespace flamebpf::dwarf {

// What one attribute holds, as far as this reader cares.
enum class Kind : uint8_t {
  kNone,
  kConstant,
  kAddress,
  kAddressIndex,
  kString,
  kStringOffset,     // in .debug_str
  kLineStringOffset, // in .debug_line_str
  kStringIndex,      // in .debug_str_offsets
  kUnitReference,    // from the unit's start
  kInfoReference,    // from .debug_info's start
  kSectionOffset,
  kRangeListIndex,
  kElsewhere, // in a supplementary (dwz) file, which is not read
  kOther,
};
struct Value {
  Kind kind = Kind::kNone;
  uint64_t number = 0;
  std::string_view text;
};

inline Value of(Kind kind, uint64_t number)
{
  Value value;
  value.kind = kind;
  value.number = number;
  return value;
}

struct Unit {
  uint64_t offset = 0; // of its header in .debug_info
  uint16_t version = 0;
  uint8_t offset_size = 4;
  uint8_t address_size = 8;
  uint64_t str_offsets_base = 0;
  uint64_t addr_base = 0;
  uint64_t rnglists_base = 0;
  uint64_t base_address = 0;
};

// Reads or passes over one attribute's value of form (implicit: the abbreviation's constant for
// DW_FORM_implicit_const) at cursor, within unit; false if malformed or of a form whose size is
// unknown (nothing after it can be read then).
bool read_form(ByteCursor& cursor,
               uint32_t form,
               int64_t implicit,
               const Unit& unit,
               Value& value,
               bool indirect_allowed = true);

} // namespace flamebpf::dwarf
