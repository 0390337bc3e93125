// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// Go's unwinding step: the functions that move a goroutine's work to the system stack and back
// (go_abi.h). Included by runtimes.bpf.h.
#ifndef FLAMEBPF_RUNTIMES_GO_BPF_H
#define FLAMEBPF_RUNTIMES_GO_BPF_H

#include "go_abi.h"

// Moves from a stack-switching function to the goroutine frame below it by the frame pointer.
// Returns 1 if it stopped the unwinding, -1 when it moved on: the caller is on another stack,
// which may lie below this one, so the stack checks start again from it.
static __always_inline int go_stack_switch_step(struct fb_unwind_state* state)
{
  frame_pointer_step(state);
  if (state->done)
    return 1;
  state->first_sp = state->sp;
  return -1;
}

#endif
