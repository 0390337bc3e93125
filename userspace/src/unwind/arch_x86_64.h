// x86-64's facts for building unwind tables (the sampler's side is bpf/arch_x86_64.bpf.h). Another
// architecture is a file like this one, chosen in unwind/arch.h, and one on the BPF side.
#pragma once

#include <array>
#include <cstdint>
#include <elf.h>

namespace flamebpf::unwind::arch {

inline constexpr const char* kName = "x86-64";
inline constexpr uint16_t kElfMachine = EM_X86_64;

// DWARF register numbers of the stack and frame pointers (rsp, rbp), and the return address's
// column that a CIE names unless it says otherwise (rip).
inline constexpr uint64_t kDwarfSp = 7;
inline constexpr uint64_t kDwarfFp = 6;
inline constexpr uint64_t kDwarfReturnAddress = 16;

// A call leaves the return address one word below the CFA (the caller's sp before the call);
// the sampler reads it there, whatever a file's CFI says.
inline constexpr int64_t kReturnAddressAtCfa = -8;
// The CFA at a function's first instruction (sp + 8: the return address just pushed), and once
// `push rbp` has run (sp + 16), with the caller's rbp two words below the CFA.
inline constexpr int16_t kCfaAtEntry = 8;
inline constexpr int16_t kCfaAfterFramePointerPush = 16;
inline constexpr int8_t kSavedFramePointerWords = -2;
inline constexpr int64_t kWordBytes = 8;

// GCC's and binutils' CFA of a PLT entry: rsp + 8, plus 8 once the entry's push has run
// (rip & 15 >= 11); the sampler computes it itself (FB_UNWIND_PLT).
inline constexpr std::array<uint8_t, 11> kPltCfaExpression = {
    0x77, 0x08,       // DW_OP_breg7 (rsp) 8
    0x80, 0x00,       // DW_OP_breg16 (rip) 0
    0x3f, 0x1a,       // DW_OP_lit15, DW_OP_and
    0x3b, 0x2a,       // DW_OP_lit11, DW_OP_ge
    0x33, 0x24, 0x22, // DW_OP_lit3, DW_OP_shl, DW_OP_plus
};

} // namespace flamebpf::unwind::arch
