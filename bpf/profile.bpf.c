// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// CPU sampler: on every cpu-clock tick, decide whether the running task belongs to a target, take
// its kernel and user stacks and count the (process, target, stacks) tuple in the kernel.
#include "vmlinux.h"

#include "profile.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "maps.bpf.h"

#define EFAULT 14
#define EEXIST 17
#define ENOMEM 12
#define PF_KTHREAD 0x00200000

char LICENSE[] SEC("license") = "Dual BSD/GPL";

// Set by userspace between intervals. active_buffer selects the count and stack maps written now.
volatile __u32 active_buffer = 0;
// Zero: samples of no target are dropped. Nonzero: they are kept, attributed to no target (the
// whole host, or the host outside every container).
volatile __u32 keep_unmatched = 1;
// Nonzero when pid_targets holds entries, so that other runs skip the lookup.
volatile __u32 pid_targets_present = 0;
// Bit N set: some cgroup target sits at cgroup2 level N, so ancestors at that level are checked.
volatile __u64 cgroup_level_mask = 0;

static __always_inline void count_event(__u32 counter)
{
  __u64* value = bpf_map_lookup_elem(&counters, &counter);
  if (value)
    *value += 1; // per-CPU slot: no other writer
}

// Returns 1 if the current task belongs to a target, setting *target_cgroup_id for cgroup targets.
static __always_inline int match_target(__u32 tgid, __u64* target_cgroup_id)
{
  *target_cgroup_id = 0;
  if (pid_targets_present && bpf_map_lookup_elem(&pid_targets, &tgid))
    return 1;

  __u64 mask = cgroup_level_mask;
  if (!mask)
    return 0;
  // Deepest first, so the most specific of nested targets wins.
  for (int level = FB_MAX_CGROUP_LEVEL; level >= 0; level--) {
    if (!(mask & (1ULL << level)))
      continue;
    __u64 ancestor = bpf_get_current_ancestor_cgroup_id(level);
    if (!ancestor)
      continue; // the task's cgroup is shallower than this level
    if (bpf_map_lookup_elem(&cgroup_targets, &ancestor)) {
      *target_cgroup_id = ancestor;
      return 1;
    }
  }
  return 0;
}

static __always_inline void classify_stack_error(long error, int user)
{
  if (error == -EEXIST)
    count_event(user ? FB_COUNTER_USTACK_COLLISION : FB_COUNTER_KSTACK_COLLISION);
  else if (error == -ENOMEM)
    count_event(FB_COUNTER_STACK_MAP_FULL);
  else if (user)
    count_event(FB_COUNTER_USTACK_MISSING);
  else
    count_event(FB_COUNTER_KSTACK_ERROR);
}

static __always_inline void notice_new_image(struct task_struct* task, struct fb_sample_key* key)
{
  struct fb_image_key image = {.tgid = key->tgid, .image_id = key->image_id};
  // Look up first: an LRU update takes a free node before it finds the key exists.
  if (bpf_map_lookup_elem(&known_procs, &image))
    return;
  __u8 seen = 1;
  if (bpf_map_update_elem(&known_procs, &image, &seen, BPF_NOEXIST))
    return; // another CPU announced it first
  struct fb_process_notice* notice = bpf_ringbuf_reserve(&notices, sizeof(*notice), 0);
  if (!notice) {
    // Forget the process so that its next sample tries again.
    bpf_map_delete_elem(&known_procs, &image);
    count_event(FB_COUNTER_NOTICE_LOST);
    return;
  }
  notice->tgid = key->tgid;
  notice->image_id = key->image_id;
  notice->target_cgroup_id = key->target_cgroup_id;
  notice->sample_time_ns = bpf_ktime_get_ns();
  BPF_CORE_READ_STR_INTO(&notice->comm, task, group_leader, comm);
  bpf_ringbuf_submit(notice, 0);
}

static __always_inline void add_sample(struct fb_sample_key* key, void* count_map)
{
  __u64* count = bpf_map_lookup_elem(count_map, key);
  if (count) {
    __sync_fetch_and_add(count, 1);
    return;
  }
  __u64 one = 1;
  long error = bpf_map_update_elem(count_map, key, &one, BPF_NOEXIST);
  if (error == -EEXIST) {
    // Another CPU inserted the same key first.
    count = bpf_map_lookup_elem(count_map, key);
    if (count)
      __sync_fetch_and_add(count, 1);
  } else if (error) {
    count_event(FB_COUNTER_COUNT_MAP_FULL);
  }
}

// Takes both stacks into the active buffer's stack map and counts them in its count map.
static __always_inline void record(struct bpf_perf_event_data* ctx,
                                   struct fb_sample_key* key,
                                   int kernel_thread,
                                   void* stack_map,
                                   void* count_map)
{
  long kernel_stack = bpf_get_stackid(ctx, stack_map, 0);
  // -EFAULT: the task was in user mode, so there is no kernel stack; that is not a loss.
  if (kernel_stack < 0 && kernel_stack != -EFAULT)
    classify_stack_error(kernel_stack, 0);
  long user_stack = -EFAULT;
  if (!kernel_thread) {
    user_stack = bpf_get_stackid(ctx, stack_map, BPF_F_USER_STACK);
    if (user_stack < 0)
      classify_stack_error(user_stack, 1);
  }
  key->kernel_stack_id = kernel_stack;
  key->user_stack_id = user_stack;
  add_sample(key, count_map);
}

SEC("perf_event")
int sample_cpu(struct bpf_perf_event_data* ctx)
{
  count_event(FB_COUNTER_SAMPLES);
  __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  if (tgid == 0) {
    // The idle task: the CPU had nothing to run.
    count_event(FB_COUNTER_FILTERED);
    return 0;
  }
  struct fb_sample_key key = {.tgid = tgid};
  if (!match_target(tgid, &key.target_cgroup_id) && !keep_unmatched) {
    count_event(FB_COUNTER_FILTERED);
    return 0;
  }

  struct task_struct* task = (struct task_struct*)bpf_get_current_task();
  int kernel_thread = BPF_CORE_READ(task, flags) & PF_KTHREAD;
  // exec gives the process a new mm: samples before and after it name different code.
  __u64 mm = (__u64)BPF_CORE_READ(task, mm);
  key.image_id = (__u32)(mm >> 6) ^ (__u32)(mm >> 38);
  notice_new_image(task, &key);

  // Odd while this CPU writes a buffer; userspace waits for it to turn even after a flip, so
  // the buffer it drains has no writer left. The locked add orders it before the index load.
  __u32 zero = 0;
  __u64* in_flight = bpf_map_lookup_elem(&write_seq, &zero);
  if (!in_flight)
    return 0;
  __sync_fetch_and_add(in_flight, 1);
  if (active_buffer == 0)
    record(ctx, &key, kernel_thread, &stacks_0, &counts_0);
  else
    record(ctx, &key, kernel_thread, &stacks_1, &counts_1);
  __sync_fetch_and_add(in_flight, 1);
  return 0;
}
