/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* CPython's part of the unwinding ABI (bpf_abi.h): the frame a Python function leaves in a user
 * stack. Shared by the frame walk and userspace's runtimes/cpython. */
#ifndef FLAMEBPF_RUNTIMES_CPYTHON_ABI_H
#define FLAMEBPF_RUNTIMES_CPYTHON_ABI_H

#include "bpf_abi.h"

/* A Python frame: its code object's address marked with FB_FRAME_RUNTIME_MARKER, named by the
 * code object's qualified name, file and first line, read from the process once per code object.
 * The address takes the low 56 bits (a user address under 5-level paging). */
#define FB_CPYTHON_CODE_MASK ((1ULL << 56) - 1)

/* Bytes of a frame read at once from its code object's field, a power of two: they hold the fields
 * the walk reads after it, each a word that ends within them. */
#define FB_CPYTHON_FRAME_SPAN 64

/* Threads looked at in an interpreter's list for the sampled one, at most. */
#define FB_CPYTHON_MAX_THREADS 32

/* A process image that runs CPython: where its state is and how its structures are laid out (the
 * verified layout's fields the walk reads), keyed by fb_image_key. */
struct fb_cpython_process {
  __u64 interpreters_head; /* address of _PyRuntime.interpreters.head */
  __u64 gil_holder;        /* address of the thread state that holds the GIL */
  __u64 eval_start;        /* _PyEval_EvalFrameDefault's code: [eval_start, eval_end) */
  __u64 eval_end;
  __u64 pid_namespace_device; /* the process's pid namespace (kernel dev_t and inode): CPython */
  __u64 pid_namespace_inode;  /* keeps its threads' ids as seen there */
  __u32 interpreter_threads_head;
  __u32 thread_next;
  __u32 thread_native_id;
  __u32 thread_cframe;
  __u32 cframe_current_frame;
  __u32 frame_code;
  __u32 frame_previous;
  __u32 frame_is_entry;
};

#endif
