// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// The runtimes' unwinding steps: the unwinder (unwind.bpf.h) hands them the rows of kinds from
// FB_UNWIND_RUNTIME_FIRST on, which their JIT tables give their code. One header per runtime, and
// one line in each function below.
#ifndef FLAMEBPF_RUNTIMES_BPF_H
#define FLAMEBPF_RUNTIMES_BPF_H

#include "cpython.bpf.h"
#include "go.bpf.h"
#include "hotspot.bpf.h"

// A row of a runtime's kind that is a generic row where the code stands (exact: the pc is where
// execution stood, not a return address) becomes that row; the others stay as they are.
static __always_inline void
runtime_row(struct fb_unwind_state* state, struct fb_unwind_row* row, int exact)
{
  if (row->kind == FB_UNWIND_HOTSPOT_COMPILED)
    hotspot_compiled_row(state, row, exact);
}

// The frame that a row of this kind records in place of the pc (frame is the pc on entry).
// Returns nonzero if it stopped the unwinding.
static __always_inline int runtime_frame(struct fb_unwind_state* state, __u8 kind, __u64* frame)
{
  if (kind == FB_UNWIND_HOTSPOT_INTERPRETER)
    return hotspot_interpreter_frame(state, frame);
  return 0;
}

// Moves to the caller of a frame whose row is of a runtime's kind. Returns 1 if it stopped the
// unwinding (an unknown kind is a bad row), 0 if the caller's frame is to be checked as any, -1
// if it is on another stack, where the checks start again.
static __always_inline int runtime_step(struct fb_unwind_state* state, __u8 kind)
{
  if (kind == FB_UNWIND_HOTSPOT_INTERPRETER)
    return hotspot_interpreter_step(state);
  if (kind == FB_UNWIND_GO_STACK_SWITCH)
    return go_stack_switch_step(state);
  unwind_stop(state, FB_COUNTER_UNWIND_BAD_ROW);
  return 1;
}

#endif
