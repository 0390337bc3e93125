/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* CPython's part of the unwinding ABI (bpf_abi.h): the frame a Python function leaves in a user
 * stack. Shared by the frame walk and userspace's runtimes/cpython. */
#ifndef FLAMEBPF_RUNTIMES_CPYTHON_ABI_H
#define FLAMEBPF_RUNTIMES_CPYTHON_ABI_H

#include "bpf_abi.h"

/* A Python frame: its code object's address marked with FB_FRAME_RUNTIME_MARKER, named by the
 * code object's qualified name, file and first line, read from the process once per code object.
 * The address takes the low 48 bits: CPython's objects are in memory the kernel gives below 47
 * bits unless a process asks for more (5-level paging). Above it, the code unit the frame is at
 * plus one (0: not known, or past FB_CPYTHON_UNIT_MASK - 1), which its line is read from. */
#define FB_CPYTHON_CODE_MASK ((1ULL << 48) - 1)
#define FB_CPYTHON_UNIT_SHIFT 48
#define FB_CPYTHON_UNIT_MASK 0x7fffULL

/* Bytes of a frame read at once from its code object's field, a power of two: they hold the fields
 * the walk reads after it, each of which ends within them. */
#define FB_CPYTHON_FRAME_SPAN 128

/* Threads looked at in an interpreter's list for the sampled one, at most. */
#define FB_CPYTHON_MAX_THREADS 32

/* A field the version does not have. */
#define FB_CPYTHON_NO_FIELD 0xffffffffu

/* How the frames one C call of the evaluation loop runs end (fb_cpython_process.frame_entry):
 * 3.11 sets a byte on the first of them, which is recorded; from 3.12 the loop keeps a frame of its
 * own below them, whose owner byte says the C stack owns it, which is not. */
#define FB_CPYTHON_ENTRY_FLAG 0
#define FB_CPYTHON_ENTRY_OWNER 1
#define FB_CPYTHON_OWNED_BY_CSTACK 3

/* A process image that runs CPython: where its state is and how its structures are laid out (the
 * verified layout's fields the walk reads), keyed by fb_image_key. */
struct fb_cpython_process {
  __u64 interpreters_head; /* address of _PyRuntime.interpreters.head */
  __u64 gil_holder;        /* address of the thread state that holds the GIL; 0 from 3.12 */
  __u64 eval_start;        /* _PyEval_EvalFrameDefault's code: [eval_start, eval_end) */
  __u64 eval_end;
  __u64 pid_namespace_device; /* the process's pid namespace (kernel dev_t and inode): CPython */
  __u64 pid_namespace_inode;  /* keeps its threads' ids as seen there */
  __u32 interpreter_threads_head;
  __u32 thread_next;
  __u32 thread_native_id;
  __u32 thread_frame;         /* the thread's _PyCFrame (3.11, 3.12), or its current frame */
  __u32 cframe_current_frame; /* FB_CPYTHON_NO_FIELD: thread_frame is the current frame */
  __u32 frame_code;
  __u32 frame_previous;
  __u32 frame_instruction; /* the code unit it is at: prev_instr, from 3.13 instr_ptr */
  __u32 code_instructions; /* the code object's first code unit (co_code_adaptive) */
  __u32 frame_entry;       /* the byte that ends a loop's frames: is_entry, or owner */
  __u32 entry_kind;        /* FB_CPYTHON_ENTRY_FLAG or FB_CPYTHON_ENTRY_OWNER */
};

#endif
