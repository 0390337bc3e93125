// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// CPython's frames (cpython_abi.h): the sampled thread's state is found at the sample's start, the
// one holding the GIL if it is this thread, else by a bounded walk of its interpreter's threads;
// each native frame of the evaluation loop is then replaced by the Python frames it runs, from the
// thread's current frame back to the one the loop was entered with. Every read is checked, and
// the frames count against the stack's depth. Included by runtimes.bpf.h.
#ifndef FLAMEBPF_RUNTIMES_CPYTHON_BPF_H
#define FLAMEBPF_RUNTIMES_CPYTHON_BPF_H

#include "cpython_abi.h"

static __always_inline __u64 cpython_word(__u64 address)
{
  __u64 word = 0;
  if (!address || bpf_probe_read_user(&word, sizeof(word), (const void*)address))
    return 0;
  return word;
}

// The thread state of thread `tid` (its id in its process's pid namespace); 0 if none is found.
static __always_inline __u64 cpython_thread_state(struct fb_cpython_process* python, __u32 tid)
{
  __u64 holder = cpython_word(python->gil_holder);
  if (holder && (__u32)cpython_word(holder + python->thread_native_id) == tid)
    return holder;
  __u64 interpreter = cpython_word(python->interpreters_head);
  __u64 thread = cpython_word(interpreter + python->interpreter_threads_head);
  for (int i = 0; i < FB_CPYTHON_MAX_THREADS && thread; i++) {
    if ((__u32)cpython_word(thread + python->thread_native_id) == tid)
      return thread;
    thread = cpython_word(thread + python->thread_next);
  }
  return 0;
}

// At the sample's start: the thread's current Python frame, if its image runs CPython.
static __always_inline void cpython_begin(struct fb_unwind_state* state)
{
  state->python_frame = 0;
  state->python_recording = 0;
  state->python_recorded = 0;
  struct fb_cpython_process* python = bpf_map_lookup_elem(&cpython_processes, &state->image);
  if (!python)
    return;
  state->python = *python;
  // The helper's own layout (uapi's struct bpf_pidns_info), not vmlinux.h's: that one would be
  // a CO-RE relocation, which has libbpf parse the kernel's BTF before the first sample.
  struct {
    __u32 pid;
    __u32 tgid;
  } in_namespace = {};
  if (bpf_get_ns_current_pid_tgid(state->python.pid_namespace_device,
                                  state->python.pid_namespace_inode,
                                  (struct bpf_pidns_info*)&in_namespace, sizeof(in_namespace)))
    return;
  __u64 thread = cpython_thread_state(&state->python, in_namespace.pid);
  if (!thread)
    return;
  __u64 frame = cpython_word(thread + state->python.thread_frame);
  if (state->python.cframe_current_frame != FB_CPYTHON_NO_FIELD)
    frame = cpython_word(frame + state->python.cframe_current_frame);
  state->python_frame = frame;
}

// Records one Python frame and moves to the one before it; after the last frame of the loop's C
// call, the loop's native frame is stepped over (or kept, if the call had none). Returns 0 to go
// on, 1 when the stack is full.
static __always_inline long cpython_record_frame(struct fb_unwind_state* state)
{
  __u64 frame = state->python_frame;
  __u32 previous_at = state->python.frame_previous - state->python.frame_code;
  __u32 entry_at = state->python.frame_entry - state->python.frame_code;
  __u32 instruction_at = state->python.frame_instruction - state->python.frame_code;
  __u64 code = 0, previous = 0, instruction = 0;
  __u8 entry = 0;
  // One read for the four fields, which lie within FB_CPYTHON_FRAME_SPAN bytes from the code's
  // (the offsets are masked to the span for the verifier; userspace gives none past its end). A
  // frame whose memory ends within the span ends the walk: reading its fields one by one too took
  // the verifier 0.15 s more, which the first samples wait for.
  int read = !bpf_probe_read_user(state->python_span, FB_CPYTHON_FRAME_SPAN,
                                  (const void*)(frame + state->python.frame_code));
  if (read) {
    code = *(__u64*)&state->python_span[0];
    previous = *(__u64*)&state->python_span[previous_at & (FB_CPYTHON_FRAME_SPAN - 1)];
    instruction = *(__u64*)&state->python_span[instruction_at & (FB_CPYTHON_FRAME_SPAN - 1)];
    entry = state->python_span[entry_at & (FB_CPYTHON_FRAME_SPAN - 1)];
  }
  int owner_kind = state->python.entry_kind == FB_CPYTHON_ENTRY_OWNER;
  int loop_frame = read && owner_kind && entry == FB_CPYTHON_OWNED_BY_CSTACK;
  int first_of_call = read && !owner_kind && entry != 0;
  if (read && code && !loop_frame) {
    // The code unit, as the reader counts it (cpython_reader.cpp): a frame just pushed, whose
    // pointer is before the first unit, is at unit 0.
    __u64 first_unit = code + state->python.code_instructions;
    __u64 unit = instruction >= first_unit ? (instruction - first_unit) / 2 : 0;
    __u64 unit_field = instruction && unit < FB_CPYTHON_UNIT_MASK ? unit + 1 : 0;
    __u64 marker = FB_FRAME_RUNTIME_MARKER | (unit_field << FB_CPYTHON_UNIT_SHIFT) |
                   (code & FB_CPYTHON_CODE_MASK);
    if (!push_frame(state, marker)) {
      unwind_stop(state, FB_COUNTER_UNWIND_TRUNCATED);
      return 1;
    }
    state->python_recorded = FB_CPYTHON_RECORDED_FRAMES;
  }
  state->python_frame = read ? previous : 0;
  // A frame that is its own caller (a forged chain) ends the walk; longer loops end with the
  // stack's depth.
  if (!read || !code || !previous || loop_frame || first_of_call || previous == frame) {
    state->python_recording = 0;
    if (state->python_recorded != FB_CPYTHON_RECORDED_FRAMES)
      state->python_recorded = FB_CPYTHON_RECORDED_NONE;
  }
  return 0;
}

#endif
