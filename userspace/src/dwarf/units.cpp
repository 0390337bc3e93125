#include "dwarf/units.h"

#include "dwarf/constants.h"

namespace flamebpf::dwarf {

UnitHeader read_unit_header(std::string_view unit_bytes, const UnitExtent& extent)
{
  UnitHeader header;
  ByteCursor cursor(unit_bytes, extent.header_size);
  Unit& unit = header.unit;
  unit.offset = extent.offset;
  unit.offset_size = extent.offset_size;
  unit.version = static_cast<uint16_t>(cursor.fixed(2));
  if (unit.version >= 2 && unit.version <= 4) {
    header.abbrev_offset = cursor.fixed(extent.offset_size);
    unit.address_size = static_cast<uint8_t>(cursor.fixed(1));
  } else if (unit.version == 5) {
    auto type = static_cast<uint8_t>(cursor.fixed(1));
    unit.address_size = static_cast<uint8_t>(cursor.fixed(1));
    header.abbrev_offset = cursor.fixed(extent.offset_size);
    if (type == kUnitType || type == kUnitSplitType) {
      header.kind = UnitKind::kTypes;
      return header;
    }
    if (type == kUnitSkeleton || type == kUnitSplitCompile) {
      header.kind = UnitKind::kSplit;
      return header;
    }
    if (type != kUnitCompile && type != kUnitPartial) {
      header.kind = UnitKind::kUnsupported;
      return header;
    }
  } else {
    header.kind = UnitKind::kUnsupported;
    return header;
  }
  if (!cursor.ok() || (unit.address_size != 2 && unit.address_size != 4 && unit.address_size != 8))
    return header; // kMalformed
  header.kind = UnitKind::kCode;
  header.dies_at = cursor.position();
  return header;
}

} // namespace flamebpf::dwarf
