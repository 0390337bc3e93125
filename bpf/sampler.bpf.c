// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// CPU sampler: on every cpu-clock tick, decide whether the running task belongs to a target, take
// its kernel and user stacks and count the (process, target, stacks) tuple in the kernel.
#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf_abi.h"
#include "maps.bpf.h"
#include "unwind.bpf.h"

#define EFAULT 14
#define EEXIST 17
#define ENOMEM 12
#define ENOENT 2
#define E2BIG 7

char LICENSE[] SEC("license") = "Dual BSD/GPL";

// Offsets of task_struct's members on the running kernel, set by userspace from its BTF before
// load. Read with bpf_probe_read_kernel rather than through CO-RE relocations, which would have
// libbpf parse the whole kernel BTF at every start.
const volatile __u32 task_mm_offset = 0;
const volatile __u32 task_group_leader_offset = 0;
const volatile __u32 task_comm_offset = 0;

// Set by userspace between intervals. active_buffer selects the count and stack maps written now.
volatile __u32 active_buffer = 0;
// Zero: samples of no target are dropped. Nonzero: they are kept, attributed to no target (the
// whole host, or the host outside every container).
volatile __u32 keep_unmatched = 1;
// Nonzero when pid_targets holds entries, so that other runs skip the lookup.
volatile __u32 pid_targets_present = 0;
// Bit N set: some cgroup target sits at cgroup2 level N, so ancestors at that level are checked.
volatile __u64 cgroup_level_mask = 0;
// Bumped by userspace after each change of cgroup_targets: cgroup_matches decided before are
// stale.
volatile __u32 filter_generation = 0;
// Bumped by userspace after it deletes from known_procs: the per-CPU last announced image may
// be one that has to be announced again.
volatile __u64 image_generation = 0;
// Entries of a buffer's count map one target may add; 0: no limit (a single target). Set by
// userspace as targets come and go.
volatile __u32 target_entry_limit = 0;

// Whose share of the count map a sample draws on: its cgroup target, else its process (a --pid
// target, or a process of the host outside every target).
static __always_inline __u64 share_key(const struct fb_sample_key* key)
{
  return key->target_cgroup_id ? key->target_cgroup_id : (1ULL << 63) | key->tgid;
}

static __always_inline void count_event(struct fb_cpu_state* cpu, __u32 counter)
{
  if (counter < FB_COUNTER_MAX)
    cpu->counts[counter] += 1; // per-CPU, and the program does not nest on a CPU: no other writer
}

// Whether the current task's cgroup lies in a cgroup target (the deepest, if nested). Decided
// once per cgroup until the targets change, and remembered per CPU for the cgroup seen last.
static __always_inline int match_cgroup(struct fb_cpu_state* cpu, __u64* target_cgroup_id)
{
  __u64 mask = cgroup_level_mask;
  if (!mask)
    return 0;
  // Read before the walk: a decision made while userspace changes the targets is stored under
  // the old generation and never used.
  __u32 generation = filter_generation;
  __u64 cgroup_id = bpf_get_current_cgroup_id();
  if (cpu->last_cgroup_id == cgroup_id && cpu->last_cgroup.generation == generation) {
    *target_cgroup_id = cpu->last_cgroup.target_cgroup_id;
    return cpu->last_cgroup.matched;
  }
  struct fb_cgroup_match decided = {.generation = generation};
  struct fb_cgroup_match* cached = bpf_map_lookup_elem(&cgroup_matches, &cgroup_id);
  if (cached && cached->generation == generation) {
    decided = *cached;
  } else {
    // Deepest first, so the most specific of nested targets wins.
    for (int level = FB_MAX_CGROUP_LEVEL; level >= 0; level--) {
      if (!(mask & (1ULL << level)))
        continue;
      __u64 ancestor = bpf_get_current_ancestor_cgroup_id(level);
      if (!ancestor)
        continue; // the task's cgroup is shallower than this level
      if (bpf_map_lookup_elem(&cgroup_targets, &ancestor)) {
        decided.target_cgroup_id = ancestor;
        decided.matched = 1;
        break;
      }
    }
    bpf_map_update_elem(&cgroup_matches, &cgroup_id, &decided, BPF_ANY);
  }
  cpu->last_cgroup_id = cgroup_id;
  cpu->last_cgroup = decided;
  *target_cgroup_id = decided.target_cgroup_id;
  return decided.matched;
}

// Returns 1 if the current task belongs to a target, setting *target_cgroup_id for cgroup targets.
static __always_inline int
match_target(struct fb_cpu_state* cpu, __u32 tgid, __u64* target_cgroup_id)
{
  *target_cgroup_id = 0;
  if (pid_targets_present && bpf_map_lookup_elem(&pid_targets, &tgid))
    return 1;
  return match_cgroup(cpu, target_cgroup_id);
}

static __always_inline void classify_stack_error(struct fb_cpu_state* cpu, long error, int user)
{
  if (error == -EEXIST)
    count_event(cpu, user ? FB_COUNTER_USTACK_COLLISION : FB_COUNTER_KSTACK_COLLISION);
  else if (error == -ENOMEM)
    count_event(cpu, FB_COUNTER_STACK_MAP_FULL);
  else if (user)
    count_event(cpu, FB_COUNTER_USTACK_MISSING);
  else
    count_event(cpu, FB_COUNTER_KSTACK_ERROR);
}

static __always_inline void
notice_new_image(struct fb_cpu_state* cpu, __u64 task, struct fb_sample_key* key)
{
  __u64 image_tag = ((__u64)key->tgid << 32) | key->image_id;
  __u64 generation = image_generation;
  if (cpu->last_image == image_tag && cpu->last_image_generation == generation)
    return;
  struct fb_image_key image = {.tgid = key->tgid, .image_id = key->image_id};
  // Look up first: an LRU update takes a free node before it finds the key exists.
  if (bpf_map_lookup_elem(&known_procs, &image))
    goto announced;
  __u8 seen = 1;
  if (bpf_map_update_elem(&known_procs, &image, &seen, BPF_NOEXIST))
    goto announced; // another CPU announced it first
  struct fb_process_notice* notice = bpf_ringbuf_reserve(&notices, sizeof(*notice), 0);
  if (!notice) {
    // Forget the process so that its next sample tries again.
    bpf_map_delete_elem(&known_procs, &image);
    count_event(cpu, FB_COUNTER_NOTICE_LOST);
    return;
  }
  notice->tgid = key->tgid;
  notice->image_id = key->image_id;
  notice->target_cgroup_id = key->target_cgroup_id;
  notice->sample_time_ns = bpf_ktime_get_ns();
  notice->cgroup_id = bpf_get_current_cgroup_id();
  // The thread-group leader's name is the process's.
  __u64 leader = 0;
  bpf_probe_read_kernel(&leader, sizeof(leader), (void*)(task + task_group_leader_offset));
  if (!leader || bpf_probe_read_kernel_str(&notice->comm, sizeof(notice->comm),
                                           (void*)(leader + task_comm_offset)) < 0)
    bpf_get_current_comm(&notice->comm, sizeof(notice->comm));
  bpf_ringbuf_submit(notice, 0);
announced:
  cpu->last_image = image_tag;
  cpu->last_image_generation = generation;
}

// Counts a new entry of the count map against the sample's target.
static __always_inline void count_target_entry(struct fb_sample_key* key, void* target_entries)
{
  __u64 share = share_key(key);
  __u32* used = bpf_map_lookup_elem(target_entries, &share);
  if (used) {
    __sync_fetch_and_add(used, 1);
    return;
  }
  __u32 one = 1;
  // Another CPU may have made it meanwhile; a full map leaves the target unbounded.
  if (bpf_map_update_elem(target_entries, &share, &one, BPF_NOEXIST) == -EEXIST) {
    used = bpf_map_lookup_elem(target_entries, &share);
    if (used)
      __sync_fetch_and_add(used, 1);
  }
}

// Whether the sample's target may still add entries to this buffer's count map.
static __always_inline int within_target_share(struct fb_sample_key* key, void* target_entries)
{
  if (!target_entry_limit)
    return 1;
  __u64 share = share_key(key);
  __u32* used = bpf_map_lookup_elem(target_entries, &share);
  return !used || *used < target_entry_limit;
}

static __always_inline void add_sample(struct fb_cpu_state* cpu,
                                       struct fb_sample_key* key,
                                       void* count_map,
                                       void* target_entries)
{
  __u64* count = bpf_map_lookup_elem(count_map, key);
  if (count) {
    __sync_fetch_and_add(count, 1);
    return;
  }
  __u64 one = 1;
  long error = bpf_map_update_elem(count_map, key, &one, BPF_NOEXIST);
  if (error == 0 && target_entry_limit) {
    count_target_entry(key, target_entries);
  } else if (error == -EEXIST) {
    // Another CPU inserted the same key first.
    count = bpf_map_lookup_elem(count_map, key);
    if (count)
      __sync_fetch_and_add(count, 1);
  } else if (error) {
    count_event(cpu, FB_COUNTER_COUNT_MAP_FULL);
  }
}

// Unwinds the user stack with the image's tables into the unwound-stack map; returns 0 and sets
// *hash, or a negative errno (-ENOENT: the image has no tables, so the kernel's walker is used).
static __always_inline long unwind_user_stack(struct bpf_perf_event_data* ctx,
                                              struct fb_cpu_state* cpu,
                                              struct fb_sample_key* key,
                                              void* user_stack_map,
                                              __u64* hash)
{
#ifdef FB_FRAME_POINTERS_ONLY
  return -ENOENT;
#else
  if (!unwinder_enabled)
    return -ENOENT;
  struct fb_unwind_state* state = unwind_state_of_cpu();
  if (!state)
    return -ENOENT;
  struct fb_image_key image = {.tgid = key->tgid, .image_id = key->image_id};
  if (!image_has_tables(state, &image))
    return -ENOENT;
  __u64 pc = 0, sp = 0, fp = 0;
  if (!user_registers(ctx, &pc, &sp, &fp))
    return -EFAULT;
  state->image = image;
  state->stack.length = 0;
  state->hash = 0x2545f4914f6cdd1dULL;
  state->pc = pc;
  state->sp = sp;
  state->fp = fp;
  state->first_sp = sp;
  state->exact_pc = 1;
  state->done = 0;
  state->window_size = 0;
  cpython_begin(state);
  for (int counter = FB_COUNTER_UNWIND_SP_BACKWARDS; counter <= FB_COUNTER_UNWIND_BAD_ROW;
       counter++)
    state->counts[counter] = 0;
  bpf_loop(FB_MAX_STACK_DEPTH, unwind_step, NULL, 0);
  if (!state->done && state->stack.length >= FB_MAX_STACK_DEPTH)
    unwind_count(state, FB_COUNTER_UNWIND_TRUNCATED);
  __u32 cut = 0;
  for (int counter = FB_COUNTER_UNWIND_SP_BACKWARDS; counter <= FB_COUNTER_UNWIND_BAD_ROW;
       counter++) {
    cpu->counts[counter] += state->counts[counter];
    cut |= state->counts[counter] != 0;
  }
  state->stack.cut = cut;

  __u64 stack_hash = state->hash | 1; // never 0, which means "not unwound" in the sample key
  long error = bpf_map_update_elem(user_stack_map, &stack_hash, &state->stack, BPF_NOEXIST);
  if (error == -EEXIST) {
    // The same stack, or another with the same hash: compare what is cheap to compare.
    struct fb_user_stack* stored = bpf_map_lookup_elem(user_stack_map, &stack_hash);
    if (!stored || stored->length != state->stack.length)
      return -EEXIST;
    // 64 bits: clang checks a 32-bit index in a zero-extended copy, which the verifier cannot
    // tie to the index it then uses.
    __u64 last = stored->length;
    if (last == 0 || last > FB_MAX_STACK_DEPTH)
      return -EEXIST;
    last -= 1;
    if (stored->frames[0] != state->stack.frames[0] ||
        stored->frames[last] != state->stack.frames[last])
      return -EEXIST;
  } else if (error) {
    return error == -E2BIG ? -ENOMEM : error; // a full hash map says E2BIG
  }
  *hash = stack_hash;
  return 0;
#endif
}

// Takes both stacks into the active buffer's stack maps and counts them in its count map.
static __always_inline void record(struct bpf_perf_event_data* ctx,
                                   struct fb_cpu_state* cpu,
                                   struct fb_sample_key* key,
                                   int kernel_thread,
                                   void* stack_map,
                                   void* user_stack_map,
                                   void* count_map,
                                   void* target_entries)
{
  // A target past its share loses the sample before its stacks take room in the stack maps.
  if (!within_target_share(key, target_entries)) {
    count_event(cpu, FB_COUNTER_TARGET_SHARE_FULL);
    return;
  }
  long kernel_stack = bpf_get_stackid(ctx, stack_map, 0);
  // -EFAULT: the task was in user mode, so there is no kernel stack; that is not a loss.
  if (kernel_stack < 0 && kernel_stack != -EFAULT)
    classify_stack_error(cpu, kernel_stack, 0);
  long user_stack = -EFAULT;
  key->user_stack_hash = 0;
  if (!kernel_thread) {
    __u64 hash = 0;
    long unwound = unwind_user_stack(ctx, cpu, key, user_stack_map, &hash);
    if (unwound == 0) {
      user_stack = 0;
      key->user_stack_hash = hash;
    } else if (unwound == -ENOENT) {
      user_stack = bpf_get_stackid(ctx, stack_map, BPF_F_USER_STACK);
      if (user_stack < 0)
        classify_stack_error(cpu, user_stack, 1);
    } else {
      user_stack = unwound;
      classify_stack_error(cpu, user_stack, 1);
    }
  }
  key->kernel_stack_id = kernel_stack;
  key->user_stack_id = user_stack;
  add_sample(cpu, key, count_map, target_entries);
}

SEC("perf_event")
int sample_cpu(struct bpf_perf_event_data* ctx)
{
#ifdef FB_FRAME_POINTERS_ONLY
  // Returns only while the slot is empty: the full sampler is still loading, or this kernel
  // cannot load it.
  bpf_tail_call(ctx, &full_sampler, 0);
#endif
  __u32 zero = 0;
  struct fb_cpu_state* cpu = bpf_map_lookup_elem(&cpu_state, &zero);
  if (!cpu)
    return 0;
  __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  struct fb_sample_key key = {.tgid = tgid};
  // tgid 0 is the idle task: the CPU had nothing to run.
  if (tgid == 0 || (!match_target(cpu, tgid, &key.target_cgroup_id) && !keep_unmatched)) {
    count_event(cpu, FB_COUNTER_FILTERED);
    return 0;
  }
  count_event(cpu, FB_COUNTER_SAMPLES);

  __u64 task = bpf_get_current_task();
  __u64 mm = 0;
  // exec gives the process a new mm: samples before and after it name different code. Kernel
  // threads have none.
  bpf_probe_read_kernel(&mm, sizeof(mm), (void*)(task + task_mm_offset));
  int kernel_thread = mm == 0;
  key.image_id = (__u32)(mm >> 6) ^ (__u32)(mm >> 38);
  notice_new_image(cpu, task, &key);

  // The locked add orders the odd write sequence before the index load, so that userspace,
  // after a switch, waits for this CPU if it may have read the old index.
  __sync_fetch_and_add(&cpu->write_seq, 1);
  if (active_buffer == 0)
    record(ctx, cpu, &key, kernel_thread, &stacks_0, &ustacks_0, &counts_0, &target_entries_0);
  else
    record(ctx, cpu, &key, kernel_thread, &stacks_1, &ustacks_1, &counts_1, &target_entries_1);
  __sync_fetch_and_add(&cpu->write_seq, 1);
  return 0;
}
