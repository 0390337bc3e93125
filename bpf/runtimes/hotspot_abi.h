/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* HotSpot's part of the unwinding ABI (bpf_abi.h): the row kinds that its JIT tables give the
 * interpreter and compiled code, and the frame the interpreter leaves. Shared by its unwinding step
 * (hotspot.bpf.h) and userspace's runtimes/hotspot/. */
#ifndef FLAMEBPF_RUNTIMES_HOTSPOT_ABI_H
#define FLAMEBPF_RUNTIMES_HOTSPOT_ABI_H

#include "bpf_abi.h"

/* A HotSpot interpreter frame: its Method* is at [fp - 24], the caller's pc at [fp + 8], the
 * caller's sp at [fp - 8] and its frame pointer at [fp]. The frame recorded is the Method* marked
 * with FB_FRAME_RUNTIME_MARKER, named by the JVM's records. */
#define FB_UNWIND_HOTSPOT_INTERPRETER (FB_UNWIND_RUNTIME_FIRST + 0)

/* Compiled code whose frame is complete: the CFA is sp + cfa_offset and the caller's frame pointer
 * is saved at CFA + 8 * fp_offset_words, as for FB_UNWIND_CFA_SP. Where a sample stopped the code
 * itself (not at a return address), it may be in an epilogue, which HotSpot's records do not
 * describe: the instructions there say how much of the frame is left. */
#define FB_UNWIND_HOTSPOT_COMPILED (FB_UNWIND_RUNTIME_FIRST + 2)

#endif
