// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// HotSpot's unwinding steps: the interpreter's frames, which keep the running method and the
// caller's sp in fixed slots below the frame pointer, and compiled code stopped in an epilogue
// (hotspot_abi.h). Included by runtimes.bpf.h.
#ifndef FLAMEBPF_RUNTIMES_HOTSPOT_BPF_H
#define FLAMEBPF_RUNTIMES_HOTSPOT_BPF_H

#include "hotspot_abi.h"

#if defined(__TARGET_ARCH_x86)
// x86-64's interpreter frame (HotSpot's frame_x86.hpp): its Method* at [fp - 24], the caller's
// sp at [fp - 8]; the caller's fp and pc as in the frame-pointer chain.
#define FB_HOTSPOT_METHOD_AT_FP (-24)
#define FB_HOTSPOT_SENDER_SP_AT_FP (-8)
// Compiled code's epilogue (C1's and C2's, JDK 17 to 25), after the frame is freed:
//   add $frame,%rsp; pop %rbp; cmp <poll word>(%r15),%rsp; ja <poll stub>; ret
// The poll word's displacement is 8 bits (49 3b 67 d8) or 32 (49 3b a7 d32); ja is 0f 87 rel32.
#define FB_X86_POP_RBP 0x5d
#define FB_X86_RET 0xc3
#define FB_HOTSPOT_EPILOGUE_BYTES 14
static __always_inline int hotspot_after_frame_pop(const __u8* code)
{
  if (code[0] == FB_X86_RET)
    return 1;
  if (code[0] == 0x0f && code[1] == 0x87)
    return code[6] == FB_X86_RET;
  if (code[0] != 0x49 || code[1] != 0x3b)
    return 0;
  if (code[2] == 0x67)
    return code[4] == 0x0f && code[5] == 0x87 && code[10] == FB_X86_RET;
  if (code[2] == 0xa7)
    return code[7] == 0x0f && code[8] == 0x87 && code[13] == FB_X86_RET;
  return 0;
}
#else
#error "HotSpot's interpreter frame is laid out for x86-64 only"
#endif

// The interpreted method, marked for userspace to name. Returns nonzero if it stopped the
// unwinding.
static __always_inline int hotspot_interpreter_frame(struct fb_unwind_state* state, __u64* frame)
{
  __u64 method = 0;
  if (read_stack(state, state->fp + FB_HOTSPOT_METHOD_AT_FP, &method, 1)) {
    unwind_stop(state, FB_COUNTER_UNWIND_READ_FAILED);
    return 1;
  }
  *frame = FB_FRAME_RUNTIME_MARKER | method;
  return 0;
}

// The generic row of compiled code (FB_UNWIND_CFA_SP), as much of its frame as is left where the
// code stands if exact: from the pop of the frame pointer on, only it and the return address, then
// only the return address. At a return address, a call is never in an epilogue.
static __always_inline void
hotspot_compiled_row(struct fb_unwind_state* state, struct fb_unwind_row* row, int exact)
{
  row->kind = FB_UNWIND_CFA_SP;
  if (!exact)
    return;
  __u8 code[FB_HOTSPOT_EPILOGUE_BYTES] = {};
  // Code at the very end of the code cache may be too close to its end for the whole read: no
  // epilogue can be told apart there, and the row stands.
  if (bpf_probe_read_user(code, sizeof(code), (const void*)state->pc))
    return;
  if (code[0] == FB_X86_POP_RBP) {
    row->cfa_offset = FB_CFA_AFTER_FP_PUSH;
    row->fp_offset_words = FB_SAVED_FP_BELOW_RETURN_WORDS;
  } else if (hotspot_after_frame_pop(code)) {
    row->cfa_offset = FB_CFA_AT_ENTRY;
    row->fp_offset_words = 0;
  }
}

// Moves to the interpreter frame's caller. Returns nonzero if it stopped the unwinding.
static __always_inline int hotspot_interpreter_step(struct fb_unwind_state* state)
{
  __u64 fp = state->fp;
  __u64 caller_pc = 0, caller_sp = 0, caller_fp = 0;
  if (read_stack(state, fp + FB_HOTSPOT_SENDER_SP_AT_FP, &caller_sp, 1) ||
      read_stack(state, fp, &caller_fp, 1) ||
      read_stack(state, fp + FB_WORD_BYTES, &caller_pc, 1)) {
    unwind_stop(state, FB_COUNTER_UNWIND_READ_FAILED);
    return 1;
  }
  state->pc = caller_pc;
  state->sp = caller_sp;
  state->fp = caller_fp;
  if (caller_pc == 0) {
    unwind_stop(state, FB_COUNTER_UNWIND_NO_RETURN);
    return 1;
  }
  return 0;
}

#endif
