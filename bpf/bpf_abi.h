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
  __u32 tgid;             /* process id as the host (init pid namespace) sees it */
  __s32 kernel_stack_id;  /* id in the stack map of this buffer, or a negative errno */
  __s32 user_stack_id;    /* id in the stack map of this buffer, or a negative errno */
  __u32 image_id;         /* which memory image of tgid (it changes at exec); 0: kernel thread */
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
