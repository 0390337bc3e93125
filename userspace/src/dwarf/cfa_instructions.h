// Call frame information's encoded pointers (DW_EH_PE_*) and instructions (DWARF 5, section
// 6.4.2), decoded one at a time; what they mean for a table of unwind rules is the reader's.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "common/byte_cursor.h"

namespace flamebpf::dwarf {

// DW_EH_PE_* pointer encodings.
inline constexpr uint8_t kPointerOmit = 0xff;
inline constexpr uint8_t kPointerIndirect = 0x80;

// A pointer in encoding at the cursor; nullopt when it cannot be read or is one flamebpf does not
// follow (indirect, or relative to text, a function or alignment). datarel is taken from 0, as
// binutils does: nothing on x86-64 defines another base for it.
std::optional<uint64_t>
read_pointer(ByteCursor& cursor, uint8_t encoding, uint64_t section_address, uint8_t address_size);

// How a CIE's instructions encode addresses.
struct CfaEncoding {
  uint8_t pointer_encoding = 0; // of DW_CFA_set_loc's operand
  uint64_t section_address = 0; // where the section is loaded, for pc-relative pointers
  uint8_t address_size = 8;
};

// One instruction, decoded. Advances and offsets named "factored" are still to be multiplied by
// the CIE's code and data alignment factors.
struct CfaInstruction {
  enum class Op : uint8_t {
    kNop,                  // DW_CFA_nop, and those the rules need nothing of (GNU_args_size)
    kSetLoc,               // address
    kAdvance,              // by address code alignment units
    kOffset,               // reg saved at CFA + offset (factored)
    kRestore,              // reg's rule back to the CIE's
    kUndefined,            // reg not recoverable
    kSameValue,            // reg unchanged
    kOtherRule,            // reg in another register, or by an expression or a value rule
    kRememberState,        // push the rules
    kRestoreState,         // pop them
    kDefCfa,               // CFA = reg + offset (in bytes)
    kDefCfaFactored,       // CFA = reg + offset (factored)
    kDefCfaRegister,       // CFA's register becomes reg
    kDefCfaOffset,         // CFA's offset becomes offset (in bytes)
    kDefCfaOffsetFactored, // CFA's offset becomes offset (factored)
    kDefCfaExpression,     // CFA by expression
  };
  Op op = Op::kNop;
  uint64_t reg = 0;
  uint64_t address = 0;
  int64_t offset = 0;
  std::string_view expression;
};

// Decodes the instruction at cursor into instruction; false if it is malformed, runs past the
// cursor's end, or has an opcode whose operands' size is unknown (nothing after it can be read).
bool decode_cfa_instruction(ByteCursor& cursor,
                            const CfaEncoding& encoding,
                            CfaInstruction& instruction);

} // namespace flamebpf::dwarf
