// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// The user-stack unwinder for process images that have unwind tables (bpf_abi.h, fb_unwind_row):
// frame by frame, the row that holds at the pc says where the caller's pc, sp and frame pointer
// are; where no row holds, the frame pointer does. Every step is bounded: the loop by
// FB_MAX_STACK_DEPTH, each search by its map's size, and the stack by sp rising at every step.
#ifndef FLAMEBPF_UNWIND_BPF_H
#define FLAMEBPF_UNWIND_BPF_H

#include "bpf_abi.h"
#include "runtimes/cpython_abi.h"

#if defined(__TARGET_ARCH_x86)
#include "arch_x86_64.bpf.h"
#else
#error "flamebpf's unwinder knows x86-64 only: another architecture needs bpf/arch_<name>.bpf.h"
#endif

// Rows of every table, one after another, in chunks of FB_ROW_CHUNK_ROWS: userspace places each
// table's rows, creates the chunks they need and writes them through a memory mapping of each.
struct fb_row_chunk {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(map_flags, BPF_F_MMAPABLE);
  __type(key, __u32);
  __type(value, struct fb_unwind_row);
  __uint(max_entries, FB_ROW_CHUNK_ROWS);
};

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
  __type(key, __u32);
  __uint(max_entries, 1); // set by userspace: the chunks of --unwind-memory
  __array(values, struct fb_row_chunk);
} unwind_rows SEC(".maps");

// Table slot -> where its rows are.
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __type(key, __u32);
  __type(value, struct fb_unwind_table);
  __uint(max_entries, 8192);
} unwind_tables SEC(".maps");

// Process image -> its mappings with tables. An image with no entry is unwound by the kernel's
// frame-pointer walker, as before tables existed.
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __type(key, struct fb_image_key);
  __type(value, struct fb_image_mappings);
  __uint(max_entries, 1024);
} image_mappings SEC(".maps");

// Process image -> where its CPython keeps its threads' frames (runtimes/cpython.bpf.h).
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __type(key, struct fb_image_key);
  __type(value, struct fb_cpython_process);
  __uint(max_entries, 4096);
} cpython_processes SEC(".maps");

// What the walk of the Python frames of one evaluation loop's C call found: frames, which stand
// for the loop's native frame, or none, and the native frame stays.
#define FB_CPYTHON_RECORDED_FRAMES 1
#define FB_CPYTHON_RECORDED_NONE 2

// Unwound user stacks, double-buffered as the stack maps are.
#define FB_USER_STACK_MAP(map_name)                                                                \
  struct {                                                                                         \
    __uint(type, BPF_MAP_TYPE_HASH);                                                               \
    __type(key, __u64);                                                                            \
    __type(value, struct fb_user_stack);                                                           \
    __uint(max_entries, 1024); /* set by userspace (--stack-storage) */                            \
  } map_name SEC(".maps")

FB_USER_STACK_MAP(ustacks_0);
FB_USER_STACK_MAP(ustacks_1);

// Set by userspace before load: nonzero when this kernel has what the unwinder needs (bpf_loop,
// bpf_task_pt_regs); zero leaves every image to the frame-pointer walker, and the verifier skips
// the unwinder's code.
const volatile __u32 unwinder_enabled = 0;
// Bumped by userspace after each change of image_mappings: the per-CPU caches below are stale.
volatile __u64 mappings_generation = 0;
// Bumped by userspace after each change of unwind_tables: the per-CPU row caches are stale.
volatile __u64 tables_generation = 0;

// A stack may not span more than this; beyond it a step is taken to be wrong.
#define FB_MAX_STACK_BYTES (512ULL << 20)
// Binary-search steps: enough for 2^23 rows in one table, 2^8 mappings in one image.
#define FB_ROW_SEARCH_STEPS 23
#define FB_MAPPING_SEARCH_STEPS 8
// Rows remembered per CPU: a busy program's samples mostly repeat the stacks before them, and a
// remembered row costs one comparison instead of a search of its table.
#define FB_ROW_CACHE_SIZE 128
// Bytes of the user stack copied at once. Each bpf_probe_read_user costs about as much as the
// kernel's walker spends on a whole frame, so frames are read from this copy (measured: 30
// frames cost 1.44x the kernel's walker when read 16 bytes at a time).
#define FB_STACK_WINDOW 1024
#define FB_PAGE_SIZE 4096ULL

struct fb_row_cache_entry {
  __u32 offset;     // the row's lookup offset into its table
  __u32 table;      // the table's slot
  __u64 generation; // tables_generation + 1 when filled: a zeroed entry matches nothing
  struct fb_unwind_row row;
};

// The unwinder's per-CPU working state: too large for the 512-byte BPF stack.
struct fb_unwind_state {
  struct fb_user_stack stack; // the frames so far
  __u64 hash;
  __u64 pc, sp, fp;
  __u64 first_sp;
  struct fb_image_key image;
  __u32 exact_pc; // the pc is where execution stands (first frame, signal), not a return address
  __u32 done;
  // A binary search's bounds, kept here rather than in registers: each step reads them back as
  // values the verifier knows nothing of, so that all paths through the search look alike to it
  // and it checks a few states per step, not each path's own ranges (measured: 206k instructions
  // and 0.38 s of loading).
  __u32 search_low, search_high;
  // The mapping that held the last pc, kept across samples of the same image until
  // mappings_generation changes.
  struct fb_image_key cached_image;
  __u64 cached_generation;
  struct fb_unwind_mapping cached_mapping;
  __u32 cached_valid;
  __u32 pad;
  // The last image found to have no tables, under cached_plain_generation.
  __u64 cached_plain_image;
  __u64 cached_plain_generation;
  __u64 counts[FB_COUNTER_MAX]; // events of this sample, added to fb_cpu_state at the end
  // The sampled thread's Python frames, when its image runs CPython: the next one to record, and
  // whether they are being recorded in place of an evaluation loop's native frame, or were.
  struct fb_cpython_process python;
  __u64 python_frame;
  __u32 python_recording;
  __u32 python_recorded; // FB_CPYTHON_RECORDED_*, or 0 before the loop's frames are walked
  __u8 python_span[FB_CPYTHON_FRAME_SPAN + 8]; // a word read at its last byte stays inside
  // A copy of the user stack from window_start, window_size bytes; emptied at each sample.
  __u64 window_start;
  __u64 window_size;
  __u8 window[FB_STACK_WINDOW];
  struct fb_row_cache_entry row_cache[FB_ROW_CACHE_SIZE];
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __type(key, __u32);
  __type(value, struct fb_unwind_state);
  __uint(max_entries, 1);
} unwind_state SEC(".maps");

// The code; the program built without the unwinder (FB_FRAME_POINTERS_ONLY) keeps only the maps
// and variables above, so that both programs have the same.
#ifndef FB_FRAME_POINTERS_ONLY

static __always_inline struct fb_unwind_state* unwind_state_of_cpu(void)
{
  __u32 zero = 0;
  return bpf_map_lookup_elem(&unwind_state, &zero);
}

static __always_inline void unwind_count(struct fb_unwind_state* state, __u32 counter)
{
  if (counter < FB_COUNTER_MAX)
    state->counts[counter] += 1;
}

#define FB_SEARCH_BOUND(field) (*(volatile __u32*)&(field))

static __always_inline void unwind_stop(struct fb_unwind_state* state, __u32 counter)
{
  unwind_count(state, counter);
  state->done = 1;
}

// Reads `count` words (1 or 2) of the user stack at address through the window, copying a new
// window from address when it lies outside. A window stops at the end of its page: the page of a
// mapped address is mapped whole, the next one may not be. Returns 0, or nonzero if unreadable.
static __always_inline int
read_stack(struct fb_unwind_state* state, __u64 address, __u64* words, __u32 count)
{
  __u32 size = count * 8;
  __u64 offset = address - state->window_start;
  if (address < state->window_start || offset + size > state->window_size) {
    __u64 length = ((address | (FB_PAGE_SIZE - 1)) + 1) - address;
    if (length > FB_STACK_WINDOW)
      length = FB_STACK_WINDOW;
    if (length < size) // the words straddle two pages
      return bpf_probe_read_user(words, size, (const void*)address);
    if (bpf_probe_read_user(state->window, length, (const void*)address)) {
      state->window_size = 0;
      return -1;
    }
    state->window_start = address;
    state->window_size = length;
    offset = 0;
  }
  if (offset > FB_STACK_WINDOW - size)
    return -1; // cannot happen; bounds the index for the verifier
  words[0] = *(__u64*)&state->window[offset];
  if (count > 1)
    words[1] = *(__u64*)&state->window[offset + 8];
  return 0;
}

// Whether the mapping that held the last pc holds this one too: consecutive frames are mostly in
// one file, and then the image's mappings are not looked up at all.
static __always_inline int
cached_mapping(struct fb_unwind_state* state, __u64 pc, struct fb_unwind_mapping* found)
{
  if (state->cached_valid && state->cached_generation == mappings_generation &&
      state->cached_image.tgid == state->image.tgid &&
      state->cached_image.image_id == state->image.image_id && pc >= state->cached_mapping.start &&
      pc < state->cached_mapping.end) {
    *found = state->cached_mapping;
    return 1;
  }
  return 0;
}

// The mapping of state->image that holds pc; 0 if none.
static __always_inline int find_mapping(struct fb_unwind_state* state,
                                        struct fb_image_mappings* image,
                                        __u64 pc,
                                        struct fb_unwind_mapping* found)
{
  __u64 generation = mappings_generation;
  __u32 count = image->count;
  if (count > FB_MAX_IMAGE_MAPPINGS)
    count = FB_MAX_IMAGE_MAPPINGS;
  // The last mapping whose start is <= pc.
  FB_SEARCH_BOUND(state->search_low) = 0;
  FB_SEARCH_BOUND(state->search_high) = count;
  for (int step = 0; step < FB_MAPPING_SEARCH_STEPS; step++) {
    __u32 low = FB_SEARCH_BOUND(state->search_low), high = FB_SEARCH_BOUND(state->search_high);
    if (low >= high)
      break;
    __u32 middle = low + (high - low) / 2;
    if (middle >= FB_MAX_IMAGE_MAPPINGS)
      return 0;
    if (image->mappings[middle].start <= pc)
      FB_SEARCH_BOUND(state->search_low) = middle + 1;
    else
      FB_SEARCH_BOUND(state->search_high) = middle;
  }
  __u32 low = FB_SEARCH_BOUND(state->search_low);
  if (low == 0 || low > FB_MAX_IMAGE_MAPPINGS)
    return 0;
  struct fb_unwind_mapping* candidate = &image->mappings[low - 1];
  if (pc >= candidate->end)
    return 0;
  *found = *candidate;
  state->cached_mapping = *candidate;
  state->cached_image = state->image;
  state->cached_generation = generation;
  state->cached_valid = 1;
  return 1;
}

// Row `index` of the global row array; 0 if its chunk does not exist.
static __always_inline struct fb_unwind_row* row_at(__u32 index)
{
  __u32 chunk_index = index / FB_ROW_CHUNK_ROWS;
  void* chunk = bpf_map_lookup_elem(&unwind_rows, &chunk_index);
  if (!chunk)
    return 0;
  __u32 at = index % FB_ROW_CHUNK_ROWS;
  return bpf_map_lookup_elem(chunk, &at);
}

// The row of the table in slot `table` that holds at offset; 0 if the table has none.
static __always_inline int
find_row(struct fb_unwind_state* state, __u32 table, __u64 offset, struct fb_unwind_row* found)
{
  struct fb_unwind_table* entry = bpf_map_lookup_elem(&unwind_tables, &table);
  if (!entry) {
    unwind_count(state, FB_COUNTER_UNWIND_BAD_ROW);
    return 0;
  }
  __u32 first = entry->first_row;
  __u32 count = entry->row_count;
  if (count == 0 || offset > 0xffffffffULL)
    return 0;
  // The last row whose pc_offset is <= offset: rows [first + low - 1] after the search.
  FB_SEARCH_BOUND(state->search_low) = 0;
  FB_SEARCH_BOUND(state->search_high) = count;
  for (int step = 0; step < FB_ROW_SEARCH_STEPS + 1; step++) {
    __u32 low = FB_SEARCH_BOUND(state->search_low), high = FB_SEARCH_BOUND(state->search_high);
    if (low >= high)
      break;
    __u32 middle = low + (high - low) / 2;
    __u32 index = first + middle;
    struct fb_unwind_row* row = row_at(index);
    if (!row) {
      unwind_count(state, FB_COUNTER_UNWIND_BAD_ROW);
      return 0;
    }
    if (row->pc_offset <= (__u32)offset)
      FB_SEARCH_BOUND(state->search_low) = middle + 1;
    else
      FB_SEARCH_BOUND(state->search_high) = middle;
  }
  __u32 low = FB_SEARCH_BOUND(state->search_low);
  if (low == 0)
    return 0;
  __u32 index = first + low - 1;
  struct fb_unwind_row* row = row_at(index);
  if (!row) {
    unwind_count(state, FB_COUNTER_UNWIND_BAD_ROW);
    return 0;
  }
  *found = *row;
  return 1;
}

// find_row through the CPU's row cache.
static __always_inline void
cached_row(struct fb_unwind_state* state, __u32 table, __u64 offset, struct fb_unwind_row* found)
{
  if (offset > 0xffffffffULL)
    return;
  __u64 generation = tables_generation + 1;
  // Fibonacci hashing: the top bits of the product mix every bit of the offset.
  __u32 slot = (((__u32)offset ^ (table << 20)) * 2654435769u) >> 25;
  struct fb_row_cache_entry* entry = &state->row_cache[slot & (FB_ROW_CACHE_SIZE - 1)];
  if (entry->generation == generation && entry->table == table && entry->offset == (__u32)offset) {
    *found = entry->row;
    return;
  }
  // Only rows found are remembered: a failed search is counted each time it happens.
  if (!find_row(state, table, offset, found))
    return;
  entry->offset = (__u32)offset;
  entry->table = table;
  entry->generation = generation;
  entry->row = *found;
}

// Appends a frame and folds it into the stack's hash.
static __always_inline int push_frame(struct fb_unwind_state* state, __u64 frame)
{
  __u32 length = state->stack.length;
  if (length >= FB_MAX_STACK_DEPTH)
    return 0;
  state->stack.frames[length] = frame;
  state->stack.length = length + 1;
  // A multiply-rotate mix: order matters, so two stacks of the same frames differ.
  __u64 hash = (state->hash ^ frame) * 0x9e3779b97f4a7c15ULL;
  state->hash = (hash << 31) | (hash >> 33);
  return 1;
}

// The classic frame-pointer step: [fp] is the caller's fp, the word above it the return address.
static __always_inline void frame_pointer_step(struct fb_unwind_state* state)
{
  __u64 fp = state->fp;
  if (fp == 0) {
    state->done = 1; // the outermost frame: its fp is zero by the ABI
    return;
  }
  __u64 saved[2]; // the caller's fp, then the return address: one read
  if (read_stack(state, fp, saved, 2)) {
    unwind_stop(state, FB_COUNTER_UNWIND_READ_FAILED);
    return;
  }
  __u64 caller_fp = saved[0], return_address = saved[1];
  if (return_address == 0) {
    state->done = 1;
    return;
  }
  state->pc = return_address;
  state->sp = fp + FB_CALLER_SP_FROM_FP;
  state->fp = caller_fp;
}

// The runtimes' steps (runtimes/), which use the state and the reads above.
#include "runtimes/runtimes.bpf.h"

// One frame: push the pc (or what a runtime's row records instead), then move to the caller.
static long unwind_step(__u32 index, void* context)
{
  struct fb_unwind_state* state = unwind_state_of_cpu();
  if (!state || state->done)
    return 1;
  __u64 pc = state->pc;
  __u64 sp = state->sp;
  // A return address read from a stack gone wrong: no frame (its top bit would read as a
  // runtime's marker).
  if (pc >= FB_USER_ADDRESS_END) {
    unwind_stop(state, FB_COUNTER_UNWIND_NO_RETURN);
    return 1;
  }
  if (state->python_recording)
    return cpython_record_frame(state);
  // The evaluation loop's frame stands for the Python frames it runs: they are recorded first,
  // then the loop's own frame is stepped over, unrecorded if they were any.
  int python_replaced = 0;
  if ((state->python_frame || state->python_recorded) && pc >= state->python.eval_start &&
      pc < state->python.eval_end) {
    if (!state->python_recorded) {
      state->python_recording = 1;
      return 0;
    }
    python_replaced = state->python_recorded == FB_CPYTHON_RECORDED_FRAMES;
    state->python_recorded = 0;
  }
  // A return address points after its call; the call itself is one byte earlier.
  __u64 lookup_pc = state->exact_pc ? pc : pc - 1;
  struct fb_unwind_row row = {.kind = FB_UNWIND_FRAME_POINTER};
  struct fb_unwind_mapping mapping;
  int found = cached_mapping(state, lookup_pc, &mapping);
  if (!found) {
    struct fb_image_mappings* image = bpf_map_lookup_elem(&image_mappings, &state->image);
    if (image) {
      found = find_mapping(state, image, lookup_pc, &mapping);
      if (!found && !image->missed)
        image->missed = 1; // userspace reads the maps again: a library loaded since
    }
  }
  if (found && lookup_pc >= mapping.table_base)
    cached_row(state, mapping.table, lookup_pc - mapping.table_base, &row);
  runtime_row(state, &row, state->exact_pc);

  __u64 frame = pc;
  if (runtime_frame(state, row.kind, &frame))
    return 1;
  if (!python_replaced && !push_frame(state, frame)) {
    unwind_stop(state, FB_COUNTER_UNWIND_TRUNCATED);
    return 1;
  }
  state->exact_pc = 0;

  __u64 cfa = 0;
  switch (row.kind) {
  case FB_UNWIND_STOP:
    state->done = 1;
    return 1;
  case FB_UNWIND_FRAME_POINTER:
    frame_pointer_step(state);
    break;
  case FB_UNWIND_CFA_SP:
  case FB_UNWIND_CFA_FP:
  case FB_UNWIND_PLT: {
    if (row.kind == FB_UNWIND_CFA_SP)
      cfa = sp + row.cfa_offset;
    else if (row.kind == FB_UNWIND_CFA_FP)
      cfa = state->fp + row.cfa_offset;
    else
      cfa = plt_cfa(sp, lookup_pc);
    __u64 return_address = 0;
    if (row.fp_offset_words == FB_SAVED_FP_BELOW_RETURN_WORDS) {
      // The usual frame: the saved frame pointer right below the return address; one read.
      __u64 saved[2];
      if (read_stack(state, cfa + FB_RETURN_ADDRESS_AT_CFA - FB_WORD_BYTES, saved, 2)) {
        unwind_stop(state, FB_COUNTER_UNWIND_READ_FAILED);
        return 1;
      }
      state->fp = saved[0];
      return_address = saved[1];
    } else if (read_stack(state, cfa + FB_RETURN_ADDRESS_AT_CFA, &return_address, 1)) {
      unwind_stop(state, FB_COUNTER_UNWIND_READ_FAILED);
      return 1;
    } else if (row.fp_offset_words != 0) {
      __u64 caller_fp = 0;
      if (read_stack(state, cfa + FB_WORD_BYTES * (__s64)row.fp_offset_words, &caller_fp, 1)) {
        unwind_stop(state, FB_COUNTER_UNWIND_READ_FAILED);
        return 1;
      }
      state->fp = caller_fp;
    }
    if (return_address == 0) {
      unwind_stop(state, FB_COUNTER_UNWIND_NO_RETURN);
      return 1;
    }
    state->pc = return_address;
    state->sp = cfa;
    break;
  }
  case FB_UNWIND_SIGNAL: {
    __u64 context_at = sp + FB_SIGFRAME_MCONTEXT;
    __u64 caller_pc = 0, caller_sp = 0, caller_fp = 0;
    // Lowest address first, so that one window holds all three.
    if (read_stack(state, context_at + FB_SIGCONTEXT_FP, &caller_fp, 1) ||
        read_stack(state, context_at + FB_SIGCONTEXT_SP, &caller_sp, 1) ||
        read_stack(state, context_at + FB_SIGCONTEXT_PC, &caller_pc, 1)) {
      unwind_stop(state, FB_COUNTER_UNWIND_READ_FAILED);
      return 1;
    }
    state->pc = caller_pc;
    state->sp = caller_sp;
    state->fp = caller_fp;
    // The interrupted pc is where execution stood, and its stack may be another (sigaltstack):
    // the checks below start again from it.
    state->exact_pc = 1;
    state->first_sp = caller_sp;
    if (caller_pc == 0) {
      state->done = 1;
      return 1;
    }
    return 0;
  }
  default: {
    int stepped = runtime_step(state, row.kind);
    if (stepped > 0)
      return 1;
    if (stepped < 0)
      return 0; // another stack: the checks below start again from its frame
    break;
  }
  }
  if (state->done)
    return 1;
  // Each caller's frame lies above its callee's, and a stack is not endless: a step that breaks
  // either is wrong, and what it found is no frame.
  if (state->sp <= sp) {
    unwind_stop(state, FB_COUNTER_UNWIND_SP_BACKWARDS);
    return 1;
  }
  if (state->sp - state->first_sp > FB_MAX_STACK_BYTES) {
    unwind_stop(state, FB_COUNTER_UNWIND_TOO_DEEP);
    return 1;
  }
  return 0;
}

// Whether the image has tables; the answer "none" is remembered per CPU until the mappings
// change, so that a process unwound by frame pointers pays one comparison.
static __always_inline int image_has_tables(struct fb_unwind_state* state,
                                            struct fb_image_key* image)
{
  __u64 tag = ((__u64)image->tgid << 32) | image->image_id;
  __u64 generation = mappings_generation;
  if (state->cached_plain_image == tag && state->cached_plain_generation == generation)
    return 0;
  if (bpf_map_lookup_elem(&image_mappings, image))
    return 1;
  state->cached_plain_image = tag;
  state->cached_plain_generation = generation;
  return 0;
}

#endif /* FB_FRAME_POINTERS_ONLY */

#endif /* FLAMEBPF_UNWIND_BPF_H */
