// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// Maps of the sampler. Sizes marked "set by userspace" are placeholders replaced before load.
#ifndef FLAMEBPF_MAPS_BPF_H
#define FLAMEBPF_MAPS_BPF_H

#include "bpf_abi.h"

#define FB_STACK_TRACE_MAP(map_name)                                                               \
  struct {                                                                                         \
    __uint(type, BPF_MAP_TYPE_STACK_TRACE);                                                        \
    __uint(key_size, sizeof(__u32));                                                               \
    __uint(value_size, FB_MAX_STACK_DEPTH * sizeof(__u64));                                        \
    __uint(max_entries, 1024); /* set by userspace (--stack-storage) */                            \
  } map_name SEC(".maps")

#define FB_COUNT_MAP(map_name)                                                                     \
  struct {                                                                                         \
    __uint(type, BPF_MAP_TYPE_HASH);                                                               \
    __type(key, struct fb_sample_key);                                                             \
    __type(value, __u64);                                                                          \
    __uint(max_entries, 1024); /* set by userspace (--count-storage) */                            \
  } map_name SEC(".maps")

// The count map's entries each target added to a buffer (key: share_key(), sampler.bpf.c), emptied
// with the buffer; past target_entry_limit a target's samples are dropped, not the other targets'.
#define FB_TARGET_ENTRIES_MAP(map_name)                                                            \
  struct {                                                                                         \
    __uint(type, BPF_MAP_TYPE_HASH);                                                               \
    __type(key, __u64);                                                                            \
    __type(value, __u32);                                                                          \
    __uint(max_entries, 8192);                                                                     \
  } map_name SEC(".maps")

// Double buffer: buffer N is stacks_N + counts_N (+ target_entries_N); active_buffer picks the
// one written.
FB_STACK_TRACE_MAP(stacks_0);
FB_STACK_TRACE_MAP(stacks_1);
FB_COUNT_MAP(counts_0);
FB_COUNT_MAP(counts_1);
FB_TARGET_ENTRIES_MAP(target_entries_0);
FB_TARGET_ENTRIES_MAP(target_entries_1);

// --pid targets: a tgid present here is a target; the value is unused (a hash map needs one).
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __type(key, __u32);
  __type(value, __u8);
  __uint(max_entries, 1024);
} pid_targets SEC(".maps");

// --cgroup targets: a cgroup2 id (the directory's inode number) present here is a target; the
// value is unused.
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __type(key, __u64);
  __type(value, __u8);
  __uint(max_entries, 4096);
} cgroup_targets SEC(".maps");

// Process images already announced through `notices`; userspace forgets those that exited.
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __type(key, struct fb_image_key);
  __type(value, __u8);
  __uint(max_entries, 16384);
} known_procs SEC(".maps");

// The sampler with the unwinder, once userspace has loaded it: the one built without it
// (FB_FRAME_POINTERS_ONLY), which the kernel verifies about twenty times faster, samples from
// the first moment and hands every sample on to it from then on.
struct {
  __uint(type, BPF_MAP_TYPE_PROG_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u32);
} full_sampler SEC(".maps");

// New-process notices (struct fb_process_notice).
struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 256 * 1024);
} notices SEC(".maps");

// Task cgroup id -> whether it lies in a target: a sample outside every target costs one lookup
// here rather than one per target level.
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __type(key, __u64);
  __type(value, struct fb_cgroup_match);
  __uint(max_entries, 8192);
} cgroup_matches SEC(".maps");

// Per-CPU counters, write sequence and last announced image (struct fb_cpu_state).
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __type(key, __u32);
  __type(value, struct fb_cpu_state);
  __uint(max_entries, 1);
} cpu_state SEC(".maps");

#endif /* FLAMEBPF_MAPS_BPF_H */
