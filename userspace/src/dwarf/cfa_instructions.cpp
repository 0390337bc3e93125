#include "dwarf/cfa_instructions.h"

namespace flamebpf::dwarf {

std::optional<uint64_t>
read_pointer(ByteCursor& cursor, uint8_t encoding, uint64_t section_address, uint8_t address_size)
{
  if (encoding == kPointerOmit || (encoding & kPointerIndirect))
    return std::nullopt;
  uint64_t field = section_address + cursor.position();
  uint64_t value = 0;
  switch (encoding & 0x0f) {
  case 0x00: // absptr
    value = address_size == 4 ? cursor.fixed<uint32_t>() : cursor.fixed<uint64_t>();
    break;
  case 0x01:
    value = cursor.uleb();
    break;
  case 0x02:
    value = cursor.fixed<uint16_t>();
    break;
  case 0x03:
    value = cursor.fixed<uint32_t>();
    break;
  case 0x04:
    value = cursor.fixed<uint64_t>();
    break;
  case 0x09:
    value = static_cast<uint64_t>(cursor.sleb());
    break;
  case 0x0a:
    value = static_cast<uint64_t>(int64_t{cursor.fixed<int16_t>()});
    break;
  case 0x0b:
    value = static_cast<uint64_t>(int64_t{cursor.fixed<int32_t>()});
    break;
  case 0x0c:
    value = cursor.fixed<uint64_t>();
    break;
  default:
    return std::nullopt;
  }
  if (!cursor.ok())
    return std::nullopt;
  switch (encoding & 0x70) {
  case 0x00:
    return value; // absolute
  case 0x10:
    return value + field; // pcrel
  case 0x30:
    return value; // datarel
  default:
    return std::nullopt;
  }
}

bool decode_cfa_instruction(ByteCursor& cursor,
                            const CfaEncoding& encoding,
                            CfaInstruction& instruction)
{
  using Op = CfaInstruction::Op;
  instruction = CfaInstruction{};
  auto with_register = [&](Op op) {
    instruction.op = op;
    instruction.reg = cursor.uleb();
  };
  uint8_t opcode = cursor.byte();
  uint8_t operand = opcode & 0x3f;
  switch (opcode >> 6) {
  case 1: // DW_CFA_advance_loc
    instruction.op = Op::kAdvance;
    instruction.address = operand;
    return cursor.ok();
  case 2: // DW_CFA_offset
    instruction.op = Op::kOffset;
    instruction.reg = operand;
    instruction.offset = static_cast<int64_t>(cursor.uleb());
    return cursor.ok();
  case 3: // DW_CFA_restore
    instruction.op = Op::kRestore;
    instruction.reg = operand;
    return cursor.ok();
  default:
    break;
  }
  switch (opcode) {
  case 0x00: // DW_CFA_nop
  case 0x2d: // DW_CFA_GNU_window_save: SPARC's, no operands
    break;
  case 0x01: { // DW_CFA_set_loc
    auto address = read_pointer(cursor, encoding.pointer_encoding, encoding.section_address,
                                encoding.address_size);
    if (!address)
      return false;
    instruction.op = Op::kSetLoc;
    instruction.address = *address;
    break;
  }
  case 0x02: // DW_CFA_advance_loc1
    instruction.op = Op::kAdvance;
    instruction.address = cursor.byte();
    break;
  case 0x03: // DW_CFA_advance_loc2
    instruction.op = Op::kAdvance;
    instruction.address = cursor.fixed<uint16_t>();
    break;
  case 0x04: // DW_CFA_advance_loc4
    instruction.op = Op::kAdvance;
    instruction.address = cursor.fixed<uint32_t>();
    break;
  case 0x1d: // DW_CFA_MIPS_advance_loc8
    instruction.op = Op::kAdvance;
    instruction.address = cursor.fixed<uint64_t>();
    break;
  case 0x05: // DW_CFA_offset_extended
    with_register(Op::kOffset);
    instruction.offset = static_cast<int64_t>(cursor.uleb());
    break;
  case 0x11: // DW_CFA_offset_extended_sf
    with_register(Op::kOffset);
    instruction.offset = cursor.sleb();
    break;
  case 0x2f: // DW_CFA_GNU_negative_offset_extended
    with_register(Op::kOffset);
    instruction.offset = -static_cast<int64_t>(cursor.uleb() & 0x7fffffffffffffff);
    break;
  case 0x06: // DW_CFA_restore_extended
    with_register(Op::kRestore);
    break;
  case 0x07: // DW_CFA_undefined
    with_register(Op::kUndefined);
    break;
  case 0x08: // DW_CFA_same_value
    with_register(Op::kSameValue);
    break;
  case 0x09: // DW_CFA_register
  case 0x14: // DW_CFA_val_offset
    with_register(Op::kOtherRule);
    cursor.uleb();
    break;
  case 0x15: // DW_CFA_val_offset_sf
    with_register(Op::kOtherRule);
    cursor.sleb();
    break;
  case 0x10: // DW_CFA_expression
  case 0x16: // DW_CFA_val_expression
    with_register(Op::kOtherRule);
    cursor.block(cursor.uleb());
    break;
  case 0x0a: // DW_CFA_remember_state
    instruction.op = Op::kRememberState;
    break;
  case 0x0b: // DW_CFA_restore_state
    instruction.op = Op::kRestoreState;
    break;
  case 0x0c: // DW_CFA_def_cfa
    with_register(Op::kDefCfa);
    instruction.offset = static_cast<int64_t>(cursor.uleb());
    break;
  case 0x12: // DW_CFA_def_cfa_sf
    with_register(Op::kDefCfaFactored);
    instruction.offset = cursor.sleb();
    break;
  case 0x0d: // DW_CFA_def_cfa_register
    with_register(Op::kDefCfaRegister);
    break;
  case 0x0e: // DW_CFA_def_cfa_offset
    instruction.op = Op::kDefCfaOffset;
    instruction.offset = static_cast<int64_t>(cursor.uleb());
    break;
  case 0x13: // DW_CFA_def_cfa_offset_sf
    instruction.op = Op::kDefCfaOffsetFactored;
    instruction.offset = cursor.sleb();
    break;
  case 0x0f: // DW_CFA_def_cfa_expression
    instruction.op = Op::kDefCfaExpression;
    instruction.expression = cursor.block(cursor.uleb());
    break;
  case 0x2e: // DW_CFA_GNU_args_size: the rules need no argument size
    cursor.uleb();
    break;
  default:
    return false; // its operands' size is unknown
  }
  return cursor.ok();
}

} // namespace flamebpf::dwarf
