/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The ABI between flamebpf's BPF programs (sampler.bpf.c, kernel_names.bpf.c) and userspace: map
 * keys and values, and the counter ids (event_counters.h). */
#ifndef FLAMEBPF_BPF_ABI_H
#define FLAMEBPF_BPF_ABI_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#include "event_counters.h"

/* Length of a task's comm, as the kernel's TASK_COMM_LEN. */
#define FB_COMM_LEN 16
/* Frames kept per stack; the kernel's perf_event_max_stack default is 127. */
#define FB_MAX_STACK_DEPTH 127
/* Deepest cgroup2 level a target may sit at (the cgroup2 root is level 0). Kubernetes pods sit at
 * 3 or 4; each level costs the verifier time at every start. */
#define FB_MAX_CGROUP_LEVEL 15
/* The count and stack maps exist twice; userspace drains the one not being written. */
#define FB_BUFFER_COUNT 2

/* Key of the in-kernel sample counts: one entry per distinct (process, target, stacks). */
struct fb_sample_key {
  __u64 target_cgroup_id; /* cgroup id of the matched --cgroup target; 0 if matched otherwise */
  /* Nonzero: the user stack was unwound by the program (unwind.bpf.h) and is this key in the */
  /* unwound-stack map of this buffer; user_stack_id is then 0 and unused */
  __u64 user_stack_hash;
  __u32 tgid;            /* process id as the host (init pid namespace) sees it */
  __s32 kernel_stack_id; /* id in the stack map of this buffer, or a negative errno */
  __s32 user_stack_id;   /* id in the stack map of this buffer, or a negative errno */
  __u32 image_id;        /* which memory image of tgid (it changes at exec); 0: kernel thread */
};

/* A process image: one tgid between two execs. Key of known_procs. */
struct fb_image_key {
  __u32 tgid;     /* process id in the init pid namespace */
  __u32 image_id; /* as in fb_sample_key */
};

/* Sent through the ring buffer the first time a process image is sampled, so userspace can
 * capture its memory map while it still lives. */
struct fb_process_notice {
  __u32 tgid;             /* process id in the init pid namespace */
  __u32 image_id;         /* as in fb_sample_key */
  __u64 target_cgroup_id; /* as in fb_sample_key */
  __u64 sample_time_ns;   /* bpf_ktime_get_ns() (CLOCK_MONOTONIC) of the first sample */
  /* The sampled task's own cgroup2 id: names the target of a process that exits before
   * userspace can read its cgroup, when its container had not joined the filter yet */
  __u64 cgroup_id;
  char comm[FB_COMM_LEN]; /* the thread-group leader's comm: the process name */
};

/* Value of the cgroup_matches cache: whether a task's own cgroup lies in a target, as decided
 * under filter_generation = generation. */
struct fb_cgroup_match {
  __u64 target_cgroup_id; /* the matched target, 0 if none */
  __u32 generation;       /* filter_generation when decided; stale once it changed */
  __u32 matched;          /* 1 if some target contains the cgroup */
};

/* What the program keeps per CPU, in one map entry so that a sample looks it up once. */
struct fb_cpu_state {
  /* Odd while the program on this CPU writes a buffer; userspace waits for it to move on after
   * switching buffers, so that the buffer it drains has no writer left. */
  __u64 write_seq;
  /* The process image this CPU announced last and the image_generation it did so in: samples of
   * the same busy process skip the lookup in known_procs. */
  __u64 last_image;
  __u64 last_image_generation;
  /* The cgroup this CPU matched last, as cached in cgroup_matches: a CPU that keeps running the
   * same cgroup decides without a map lookup. */
  __u64 last_cgroup_id;
  struct fb_cgroup_match last_cgroup;
  __u64 counts[FB_COUNTER_MAX];
};

/* Unwinding without frame pointers. Userspace turns each code file's CFI (and a runtime's records
 * of its JIT code) into tables of rows; the program unwinds a frame with the row that holds at its
 * pc. A table is shared by every process that maps the same file. */

/* How a row finds the caller's frame. CFA (canonical frame address) is the caller's stack pointer
 * just before its call; the return address is at CFA - 8 (x86-64).
 *   FRAME_POINTER    no rule here: follow the frame pointer, as without tables
 *   CFA_SP, CFA_FP   CFA = sp (or the frame pointer) + cfa_offset
 *   PLT              a PLT entry: CFA = sp + 8, or sp + 16 once its push has run
 *   SIGNAL           a signal trampoline: the caller's registers are in the ucontext of the signal
 *                    frame at sp
 *   STOP             the outermost frame (its return address is undefined)
 * Kinds from RUNTIME_FIRST on are the runtimes', each defined and stepped by its header in
 * bpf/runtimes/ (<runtime>_abi.h). */
#define FB_UNWIND_FRAME_POINTER 0
#define FB_UNWIND_CFA_SP 1
#define FB_UNWIND_CFA_FP 2
#define FB_UNWIND_PLT 3
#define FB_UNWIND_SIGNAL 4
#define FB_UNWIND_STOP 5
#define FB_UNWIND_RUNTIME_FIRST 6

/* One row of an unwind table: the rule that holds from pc_offset up to the next row's. Rows are
 * sorted by pc_offset; the last row of a table is FB_UNWIND_FRAME_POINTER and ends it. */
struct fb_unwind_row {
  __u32 pc_offset;      /* from the table's base address (an ELF virtual address, or the */
                        /* absolute address for JIT code) */
  __u8 kind;            /* FB_UNWIND_* */
  __s8 fp_offset_words; /* the caller's frame pointer is saved at CFA + 8 * this; 0: the frame */
                        /* pointer register is not changed by this frame */
  __s16 cfa_offset;     /* bytes added to the CFA's register (FB_UNWIND_CFA_*) */
};

/* Rows per chunk of the global row array (unwind_rows): 1 MiB. Userspace creates a chunk when a
 * table first needs it, so the array's memory follows the tables up to --unwind-memory. */
#define FB_ROW_CHUNK_ROWS (1U << 17)

/* Where the rows of one table lie in the global row array (unwind_rows): rows first_row up to
 * first_row + row_count, in chunk first_row / FB_ROW_CHUNK_ROWS and on. Value of unwind_tables,
 * indexed by table slot. */
struct fb_unwind_table {
  __u32 first_row;
  __u32 row_count; /* 0: the slot is free */
};

/* Mappings with unwind tables that one process image may have; beyond them, frames there are
 * unwound by the frame pointer. */
#define FB_MAX_IMAGE_MAPPINGS 128

/* The table_base of executable code known to have no table (a JIT's anonymous code, a file with
 * no CFI): no pc reaches it, so its frames are unwound by the frame pointer without counting as a
 * miss. */
#define FB_NO_TABLE_BASE (~0ULL)

/* One executable mapping of a process image and the table that unwinds its code. */
struct fb_unwind_mapping {
  __u64 start;      /* first address */
  __u64 end;        /* one past the last address */
  __u64 table_base; /* the address that the table's pc_offset 0 stands for: load bias plus the */
                    /* table's base address; FB_NO_TABLE_BASE for code with no table */
  __u32 table;      /* slot in unwind_tables */
  __u32 pad;
};

/* Value of image_mappings, keyed by fb_image_key: a process image's executable mappings (those
 * with tables take the places first), sorted by start and not overlapping. Replaced whole, so a
 * reader sees the old set or the new. */
struct fb_image_mappings {
  __u32 count;  /* entries of mappings in use, at most FB_MAX_IMAGE_MAPPINGS */
  __u32 missed; /* set by the program when a pc of this image had no mapping here */
  struct fb_unwind_mapping mappings[FB_MAX_IMAGE_MAPPINGS];
};

/* Value of the unwound-stack maps, keyed by a hash of the frames (fb_sample_key.user_stack_hash):
 * a user stack the program unwound itself. */
struct fb_user_stack {
  __u32 length; /* frames in use */
  __u32 cut;    /* nonzero: a step failed or the depth ran out (FB_COUNTER_UNWIND_*), so the */
                /* outermost frames are missing */
  __u64 frames[FB_MAX_STACK_DEPTH]; /* innermost first; see FB_FRAME_RUNTIME_MARKER */
};

/* A user frame with this bit set is no code address but a marker a runtime's unwinding step left
 * (bpf/runtimes/), for the runtime that owns the image to name (userspace's runtimes/); user
 * addresses never have it. */
#define FB_FRAME_RUNTIME_MARKER (1ULL << 63)

/* Kernel addresses named by the kernel_names program, a batch at a time: the kernel names its own
 * code through bpf_snprintf's %ps, for the few addresses a profile has, and where /proc/kallsyms
 * hides its addresses from flamebpf (no CAP_SYSLOG while perf_event_paranoid > 1). */
#define FB_KERNEL_NAMES_BATCH 256
#define FB_KERNEL_NAME_LEN 128 /* "name [module]", NUL-terminated, cut to fit */

struct fb_kernel_names {
  __u32 count; /* addresses to name, at most FB_KERNEL_NAMES_BATCH */
  __u32 pad;
  __u64 addresses[FB_KERNEL_NAMES_BATCH];
  char names[FB_KERNEL_NAMES_BATCH][FB_KERNEL_NAME_LEN];
};

#endif /* FLAMEBPF_BPF_ABI_H */
