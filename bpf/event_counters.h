/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Ids of the sampling program's event counters: part of the BPF ABI (bpf_abi.h), and on their own
 * so that the profile stage can carry the counts without seeing the ABI's structs. */
#ifndef FLAMEBPF_EVENT_COUNTERS_H
#define FLAMEBPF_EVENT_COUNTERS_H

/* Ids of the per-CPU event counters (fb_cpu_state.counts), bumped by BPF and summed by
 * userspace. */
#define FB_COUNTER_SAMPLES 0          /* samples kept: of a target, or of the host when kept */
#define FB_COUNTER_FILTERED 1         /* samples outside every target, ignored by design */
#define FB_COUNTER_KSTACK_COLLISION 2 /* kernel stack lost: hash collision in the stack map */
#define FB_COUNTER_USTACK_COLLISION 3 /* user stack lost: hash collision in the stack map */
#define FB_COUNTER_STACK_MAP_FULL 4   /* a stack lost because the stack map was full */
#define FB_COUNTER_USTACK_MISSING 5   /* user stack unreadable for a user process */
#define FB_COUNTER_COUNT_MAP_FULL 6   /* sample lost because the count map was full */
#define FB_COUNTER_NOTICE_LOST 7      /* new-process notice lost: ring buffer full */
#define FB_COUNTER_KSTACK_ERROR 8     /* kernel stack lost for another reason */
/* The unwinder (unwind.bpf.h) ended a stack early because a step failed a sanity check: */
#define FB_COUNTER_UNWIND_SP_BACKWARDS 9 /* the caller's sp was not above the callee's */
#define FB_COUNTER_UNWIND_TOO_DEEP 10    /* the stack spanned more bytes than a stack may */
#define FB_COUNTER_UNWIND_NO_RETURN 11   /* a table row gave a zero return address */
#define FB_COUNTER_UNWIND_READ_FAILED 12 /* user memory unreadable (paged out, or a bad rule) */
#define FB_COUNTER_UNWIND_TRUNCATED 13   /* more frames than FB_MAX_STACK_DEPTH */
#define FB_COUNTER_UNWIND_BAD_ROW 14     /* a table slot or row index outside its map */
/* A sample lost because its target had added its share of the count map's entries in the
 * interval (target_entry_limit): one target cannot crowd the others out. */
#define FB_COUNTER_TARGET_SHARE_FULL 15
#define FB_COUNTER_MAX 16

#endif /* FLAMEBPF_EVENT_COUNTERS_H */
