#include "dwarf/forms.h"

#include "dwarf/constants.h"

namespace flamebpf::dwarf {

bool read_form(ByteCursor& cursor,
               uint32_t form,
               int64_t implicit,
               const Unit& unit,
               Value& value,
               bool indirect_allowed)
{
  value = Value{};
  switch (form) {
  case kFormAddr:
    value = of(Kind::kAddress, cursor.fixed(unit.address_size));
    break;
  case kFormBlock1:
    cursor.skip(cursor.fixed(1));
    value.kind = Kind::kOther;
    break;
  case kFormBlock2:
    cursor.skip(cursor.fixed(2));
    value.kind = Kind::kOther;
    break;
  case kFormBlock4:
    cursor.skip(cursor.fixed(4));
    value.kind = Kind::kOther;
    break;
  case kFormBlock:
  case kFormExprloc:
    cursor.skip(cursor.uleb());
    value.kind = Kind::kOther;
    break;
  case kFormData1:
  case kFormFlag:
    value = of(Kind::kConstant, cursor.fixed(1));
    break;
  case kFormData2:
    value = of(Kind::kConstant, cursor.fixed(2));
    break;
  case kFormData4:
    value = of(Kind::kConstant, cursor.fixed(4));
    break;
  case kFormData8:
    value = of(Kind::kConstant, cursor.fixed(8));
    break;
  case kFormData16:
    cursor.skip(16);
    value.kind = Kind::kOther;
    break;
  case kFormSdata:
    value = of(Kind::kConstant, static_cast<uint64_t>(cursor.sleb()));
    break;
  case kFormUdata:
    value = of(Kind::kConstant, cursor.uleb());
    break;
  case kFormFlagPresent:
    value = of(Kind::kConstant, 1);
    break;
  case kFormImplicitConst:
    value = of(Kind::kConstant, static_cast<uint64_t>(implicit));
    break;
  case kFormString:
    value.kind = Kind::kString;
    value.text = cursor.string();
    break;
  case kFormStrp:
    value = of(Kind::kStringOffset, cursor.fixed(unit.offset_size));
    break;
  case kFormLineStrp:
    value = of(Kind::kLineStringOffset, cursor.fixed(unit.offset_size));
    break;
  case kFormStrpSup:
  case kFormGnuStrpAlt:
  case kFormGnuRefAlt:
    value = of(Kind::kElsewhere, cursor.fixed(unit.offset_size));
    break;
  case kFormRefSup4:
    value = of(Kind::kElsewhere, cursor.fixed(4));
    break;
  case kFormRefSup8:
    value = of(Kind::kElsewhere, cursor.fixed(8));
    break;
  case kFormRefAddr:
    // DWARF 2 wrote it address-sized.
    value = of(Kind::kInfoReference,
               cursor.fixed(unit.version <= 2 ? unit.address_size : unit.offset_size));
    break;
  case kFormRef1:
    value = of(Kind::kUnitReference, cursor.fixed(1));
    break;
  case kFormRef2:
    value = of(Kind::kUnitReference, cursor.fixed(2));
    break;
  case kFormRef4:
    value = of(Kind::kUnitReference, cursor.fixed(4));
    break;
  case kFormRef8:
    value = of(Kind::kUnitReference, cursor.fixed(8));
    break;
  case kFormRefUdata:
    value = of(Kind::kUnitReference, cursor.uleb());
    break;
  case kFormRefSig8:
    cursor.skip(8);
    value.kind = Kind::kOther;
    break;
  case kFormSecOffset:
    value = of(Kind::kSectionOffset, cursor.fixed(unit.offset_size));
    break;
  case kFormStrx:
  case kFormGnuStrIndex:
    value = of(Kind::kStringIndex, cursor.uleb());
    break;
  case kFormStrx1:
    value = of(Kind::kStringIndex, cursor.fixed(1));
    break;
  case kFormStrx2:
    value = of(Kind::kStringIndex, cursor.fixed(2));
    break;
  case kFormStrx3:
    value = of(Kind::kStringIndex, cursor.fixed(3));
    break;
  case kFormStrx4:
    value = of(Kind::kStringIndex, cursor.fixed(4));
    break;
  case kFormAddrx:
  case kFormGnuAddrIndex:
    value = of(Kind::kAddressIndex, cursor.uleb());
    break;
  case kFormAddrx1:
    value = of(Kind::kAddressIndex, cursor.fixed(1));
    break;
  case kFormAddrx2:
    value = of(Kind::kAddressIndex, cursor.fixed(2));
    break;
  case kFormAddrx3:
    value = of(Kind::kAddressIndex, cursor.fixed(3));
    break;
  case kFormAddrx4:
    value = of(Kind::kAddressIndex, cursor.fixed(4));
    break;
  case kFormRnglistx:
    value = of(Kind::kRangeListIndex, cursor.uleb());
    break;
  case kFormLoclistx:
    cursor.uleb();
    value.kind = Kind::kOther;
    break;
  case kFormIndirect: {
    // One level only: the form named may not be indirect again, nor implicit_const (whose
    // value lives in the abbreviation, which has none here).
    uint64_t named = cursor.uleb();
    if (!indirect_allowed || named == kFormIndirect || named == kFormImplicitConst ||
        named > UINT32_MAX)
      return false;
    return read_form(cursor, static_cast<uint32_t>(named), 0, unit, value, false);
  }
  default:
    return false; // unknown: its size is unknown, so nothing after it can be read
  }
  return cursor.ok();
}

} // namespace flamebpf::dwarf
