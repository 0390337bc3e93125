/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Go's part of the unwinding ABI (bpf_abi.h): the row kind that Go's tables give the functions
 * that switch stacks. Shared by its unwinding step (go.bpf.h) and userspace's unwind/go_table. */
#ifndef FLAMEBPF_RUNTIMES_GO_ABI_H
#define FLAMEBPF_RUNTIMES_GO_ABI_H

#include "bpf_abi.h"

/* A Go function that writes sp (Go's SPWRITE flag: asmcgocall, systemstack, morestack, mcall):
 * its frame pointer is still that of the goroutine frame it was called from, on another stack
 * than its own sp. Its caller is found by the frame pointer, and the stack checks restart there. */
#define FB_UNWIND_GO_STACK_SWITCH (FB_UNWIND_RUNTIME_FIRST + 1)

#endif
