// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// HotSpot's unwinding step: the interpreter's frames, which keep the running method and the
// caller's sp in fixed slots below the frame pointer (hotspot_abi.h). Included by runtimes.bpf.h.
#ifndef FLAMEBPF_RUNTIMES_HOTSPOT_BPF_H
#define FLAMEBPF_RUNTIMES_HOTSPOT_BPF_H

#include "hotspot_abi.h"

#if defined(__TARGET_ARCH_x86)
// x86-64's interpreter frame (HotSpot's frame_x86.hpp): its Method* at [fp - 24], the caller's
// sp at [fp - 8]; the caller's fp and pc as in the frame-pointer chain.
#define FB_HOTSPOT_METHOD_AT_FP (-24)
#define FB_HOTSPOT_SENDER_SP_AT_FP (-8)
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
