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

#endif
