// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// The floor flamebpf's sampling program is measured against: the least a stack profiler does per
// sample in the kernel. Both stacks into a stack map, one count in a hash map, nothing else.
#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define YARDSTICK_STACK_DEPTH 127

struct stack_pair {
  __s32 kernel_stack_id;
  __s32 user_stack_id;
};

struct {
  __uint(type, BPF_MAP_TYPE_STACK_TRACE);
  __uint(key_size, sizeof(__u32));
  __uint(value_size, YARDSTICK_STACK_DEPTH * sizeof(__u64));
  __uint(max_entries, 8192);
} stacks SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __type(key, struct stack_pair);
  __type(value, __u64);
  __uint(max_entries, 16384);
} counts SEC(".maps");

// bpf_ktime_get_ns() of the first sample, for the start-up measurement: one load and a branch
// per sample.
volatile __u64 first_sample_ns = 0;

SEC("perf_event")
int yardstick(struct bpf_perf_event_data* ctx)
{
  struct stack_pair key = {
      .kernel_stack_id = bpf_get_stackid(ctx, &stacks, 0),
      .user_stack_id = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK),
  };
  __u64* count = bpf_map_lookup_elem(&counts, &key);
  if (count) {
    __sync_fetch_and_add(count, 1);
  } else {
    __u64 one = 1;
    bpf_map_update_elem(&counts, &key, &one, BPF_NOEXIST);
  }
  if (!first_sample_ns)
    first_sample_ns = bpf_ktime_get_ns();
  return 0;
}

// Does nothing: what the kernel's run-time accounting (kernel.bpf_stats_enabled) itself costs per
// sample, to subtract from the others.
SEC("perf_event")
int empty(struct bpf_perf_event_data* ctx)
{
  return 0;
}
