#include "sampler/sampler.h"

#include <algorithm>
#include <atomic>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <optional>
#include <string>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/log.h"
#include "common/procfs.h"
#include "common/text.h"
#include "common/unique_fd.h"
#include "sampler/bpf_skeleton.h"
#include "sampler/features.h"
#include "sampler/map_walk.h"
#include "sampler/perf_events.h"
#include "sampler/task_offsets.h"

namespace flamebpf::sampler {
namespace {

// Reads the maps of a loaded skeleton; libbpf's -errno returns become Errors here.
class BpfMapReader final : public drain::MapReader {
public:
  explicit BpfMapReader(::sampler_bpf* skeleton) : skeleton_(skeleton)
  {
    int possible = libbpf_num_possible_cpus();
    possible_cpus_ = possible > 0 ? static_cast<size_t>(possible) : 1;
  }

  Result<int> switch_buffer() override
  {
    uint32_t previous = __atomic_load_n(&skeleton_->bss->active_buffer, __ATOMIC_RELAXED);
    // Sequentially consistent, so the store is visible before the write sequences are read.
    __atomic_store_n(&skeleton_->bss->active_buffer, previous ^ 1u, __ATOMIC_SEQ_CST);
    if (auto waited = wait_for_writers(); !waited)
      return fail(waited.error());
    return static_cast<int>(previous);
  }

  Result<std::vector<drain::CountEntry>> take_counts(int buffer) override
  {
    bpf_map* map = buffer == 0 ? skeleton_->maps.counts_0 : skeleton_->maps.counts_1;
    auto taken = take_entries<fb_sample_key, uint64_t>(bpf_map__fd(map), bpf_map__max_entries(map),
                                                       "the sample count map");
    if (!taken)
      return fail(taken.error());
    // The buffer's count map is empty again, and so is every target's share of it.
    bpf_map* shares =
        buffer == 0 ? skeleton_->maps.target_entries_0 : skeleton_->maps.target_entries_1;
    if (auto cleared = clear_map<uint64_t>(bpf_map__fd(shares), "the targets' entry counts");
        !cleared)
      return fail(cleared.error());
    std::vector<drain::CountEntry> entries;
    entries.reserve(taken->size());
    for (const auto& entry : *taken)
      entries.push_back({entry.key, entry.value});
    return entries;
  }

  Result<std::vector<uint64_t>> read_stack(int buffer, int32_t stack_id) override
  {
    bpf_map* map = buffer == 0 ? skeleton_->maps.stacks_0 : skeleton_->maps.stacks_1;
    uint64_t frames[FB_MAX_STACK_DEPTH] = {};
    uint32_t key = static_cast<uint32_t>(stack_id);
    if (bpf_map_lookup_elem(bpf_map__fd(map), &key, frames) != 0)
      return fail(system_error(errno, "cannot read stack " + std::to_string(stack_id)));
    std::vector<uint64_t> stack;
    for (uint64_t frame : frames) {
      if (frame == 0)
        break;
      stack.push_back(frame);
    }
    return stack;
  }

  Result<drain::UnwoundStack> read_user_stack(int buffer, uint64_t hash) override
  {
    bpf_map* map = buffer == 0 ? skeleton_->maps.ustacks_0 : skeleton_->maps.ustacks_1;
    fb_user_stack stack;
    if (bpf_map_lookup_elem(bpf_map__fd(map), &hash, &stack) != 0)
      return fail(system_error(errno, "cannot read unwound stack " + std::to_string(hash)));
    uint32_t length = std::min<uint32_t>(stack.length, FB_MAX_STACK_DEPTH);
    return drain::UnwoundStack{{stack.frames, stack.frames + length}, stack.cut != 0};
  }

  Result<> clear_stacks(int buffer) override
  {
    bpf_map* map = buffer == 0 ? skeleton_->maps.stacks_0 : skeleton_->maps.stacks_1;
    if (auto cleared = clear_map<uint32_t>(bpf_map__fd(map), "the stack map"); !cleared)
      return cleared;
    bpf_map* unwound = buffer == 0 ? skeleton_->maps.ustacks_0 : skeleton_->maps.ustacks_1;
    return clear_map<uint64_t>(bpf_map__fd(unwound), "the unwound-stack map");
  }

  Result<profile::DropCounters> read_counters() override
  {
    auto states = read_cpu_states();
    if (!states)
      return fail(states.error());
    profile::DropCounters totals;
    for (const auto& cpu : *states)
      for (uint32_t counter = 0; counter < FB_COUNTER_MAX; ++counter)
        totals.counts[counter] += cpu.counts[counter];
    return totals;
  }

private:
  // A CPU whose write sequence is odd is inside the program and may still hold the old index;
  // waits until each such sequence has moved on. Programs run for microseconds.
  Result<> wait_for_writers()
  {
    auto before = read_cpu_states();
    if (!before)
      return fail(before.error());
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    for (;;) {
      auto now = read_cpu_states();
      if (!now)
        return fail(now.error());
      bool busy = false;
      for (size_t cpu = 0; cpu < possible_cpus_; ++cpu)
        busy |= ((*before)[cpu].write_seq & 1) && (*now)[cpu].write_seq == (*before)[cpu].write_seq;
      if (!busy)
        return {};
      if (std::chrono::steady_clock::now() > deadline)
        return fail(error("a CPU stayed inside the sampling program for over a second"));
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  Result<std::vector<fb_cpu_state>> read_cpu_states()
  {
    std::vector<fb_cpu_state> states(possible_cpus_);
    uint32_t zero = 0;
    if (bpf_map_lookup_elem(bpf_map__fd(skeleton_->maps.cpu_state), &zero, states.data()) != 0)
      return fail(system_error(errno, "cannot read the per-CPU sampler state"));
    return states;
  }

  ::sampler_bpf* skeleton_;
  size_t possible_cpus_;
};

// The unwind tables' maps of a loaded skeleton. The row array is made of chunks (unwind.bpf.h),
// created when a table first needs one, so that its memory follows the tables; rows are written
// through a shared mapping of each chunk: a table of a million rows is a few copies, not a
// million system calls.
class BpfTableMaps final : public unwind::TableMaps {
public:
  BpfTableMaps(::sampler_bpf* skeleton, uint32_t row_capacity)
      : skeleton_(skeleton), row_capacity_(row_capacity)
  {
  }
  ~BpfTableMaps() override
  {
    for (auto& chunk : chunks_) {
      if (chunk.rows)
        munmap(chunk.rows, kChunkBytes);
    }
  }
  BpfTableMaps(const BpfTableMaps&) = delete;
  BpfTableMaps& operator=(const BpfTableMaps&) = delete;

  uint32_t row_capacity() const override { return row_capacity_; }
  uint32_t table_capacity() const override
  {
    return bpf_map__max_entries(skeleton_->maps.unwind_tables);
  }

  Result<> write_rows(uint32_t first_row, std::span<const fb_unwind_row> rows) override
  {
    if (first_row > row_capacity_ || rows.size() > row_capacity_ - first_row)
      return fail(error("unwind rows past the end of the row array"));
    size_t written = 0;
    while (written < rows.size()) {
      uint32_t row = first_row + static_cast<uint32_t>(written);
      auto chunk = chunk_at(row / FB_ROW_CHUNK_ROWS);
      if (!chunk)
        return fail(chunk.error());
      uint32_t at = row % FB_ROW_CHUNK_ROWS;
      size_t count = std::min<size_t>(rows.size() - written, FB_ROW_CHUNK_ROWS - at);
      std::memcpy(*chunk + at, rows.data() + written, count * sizeof(fb_unwind_row));
      written += count;
    }
    // The rows are in place before any table slot can point at them.
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return {};
  }

  Result<> set_table(uint32_t slot, const fb_unwind_table& table) override
  {
    if (bpf_map_update_elem(bpf_map__fd(skeleton_->maps.unwind_tables), &slot, &table, BPF_ANY) !=
        0)
      return fail(system_error(errno, "cannot set unwind table " + std::to_string(slot)));
    // After the change: a row remembered from the old table is looked up again.
    __atomic_add_fetch(&skeleton_->bss->tables_generation, 1ull, __ATOMIC_SEQ_CST);
    return {};
  }

  Result<> set_image(const fb_image_key& image, const fb_image_mappings& mappings) override
  {
    if (bpf_map_update_elem(bpf_map__fd(skeleton_->maps.image_mappings), &image, &mappings,
                            BPF_ANY) != 0)
      return fail(system_error(errno, "cannot install the unwind mappings of process " +
                                          std::to_string(image.tgid)));
    bump_generation();
    return {};
  }

  Result<> set_cpython_walk(const fb_image_key& image, const fb_cpython_process* walk) override
  {
    int fd = bpf_map__fd(skeleton_->maps.cpython_processes);
    if (!walk) {
      bpf_map_delete_elem(fd, &image);
      return {};
    }
    if (bpf_map_update_elem(fd, &image, walk, BPF_ANY) != 0)
      return fail(system_error(errno, "cannot walk the Python frames of process " +
                                          std::to_string(image.tgid)));
    return {};
  }

  void remove_image(const fb_image_key& image) override
  {
    if (bpf_map_delete_elem(bpf_map__fd(skeleton_->maps.image_mappings), &image) == 0)
      bump_generation();
  }

  // The chunks created so far, for the map memory they take.
  std::vector<int> chunk_fds() const
  {
    std::vector<int> fds;
    for (const auto& chunk : chunks_) {
      if (chunk.rows)
        fds.push_back(chunk.map.get());
    }
    return fds;
  }

private:
  // The per-CPU caches of mappings (unwind.bpf.h) hold until this changes.
  void bump_generation()
  {
    __atomic_add_fetch(&skeleton_->bss->mappings_generation, 1ull, __ATOMIC_SEQ_CST);
  }

  static constexpr size_t kChunkBytes = size_t{FB_ROW_CHUNK_ROWS} * sizeof(fb_unwind_row);

  struct Chunk {
    UniqueFd map;
    fb_unwind_row* rows = nullptr;
  };

  // The rows of chunk `index`, created and put in the row array if it is not there yet.
  Result<fb_unwind_row*> chunk_at(uint32_t index)
  {
    if (index < chunks_.size() && chunks_[index].rows)
      return chunks_[index].rows;
    if (index >= chunks_.size())
      chunks_.resize(index + 1);
    LIBBPF_OPTS(bpf_map_create_opts, options, .map_flags = BPF_F_MMAPABLE);
    UniqueFd map(bpf_map_create(BPF_MAP_TYPE_ARRAY, "fb_unwind_rows", sizeof(uint32_t),
                                sizeof(fb_unwind_row), FB_ROW_CHUNK_ROWS, &options));
    if (!map.valid())
      return fail(system_error(errno, "cannot create unwind row chunk " + std::to_string(index)));
    void* rows = mmap(nullptr, kChunkBytes, PROT_READ | PROT_WRITE, MAP_SHARED, map.get(), 0);
    if (rows == MAP_FAILED)
      return fail(system_error(errno, "cannot map unwind row chunk " + std::to_string(index)));
    int fd = map.get();
    if (bpf_map_update_elem(bpf_map__fd(skeleton_->maps.unwind_rows), &index, &fd, BPF_ANY) != 0) {
      auto failure = system_error(errno, "cannot add unwind row chunk " + std::to_string(index));
      munmap(rows, kChunkBytes);
      return fail(failure);
    }
    chunks_[index] = Chunk{std::move(map), static_cast<fb_unwind_row*>(rows)};
    return chunks_[index].rows;
  }

  ::sampler_bpf* skeleton_;
  uint32_t row_capacity_;
  std::vector<Chunk> chunks_; // by index; empty where not created yet
};

int handle_notice(void* context, void* data, size_t size)
{
  auto* handler = static_cast<Sampler::NoticeHandler*>(context);
  if (size >= sizeof(fb_process_notice)) {
    fb_process_notice notice;
    std::memcpy(&notice, data, sizeof notice);
    (*handler)(notice);
  }
  return 0;
}

Result<> add_pid(::sampler_bpf* skeleton, uint32_t pid)
{
  uint8_t present = 1;
  if (bpf_map_update_elem(bpf_map__fd(skeleton->maps.pid_targets), &pid, &present, BPF_ANY) != 0)
    return fail(system_error(errno, "cannot add pid " + std::to_string(pid) + " to the filter"));
  skeleton->bss->pid_targets_present = 1;
  return {};
}

} // namespace

struct Sampler::State {
  // The program built without the unwinder, whose maps every program and reader shares: it
  // samples from the start, and hands each sample to the program with the unwinder once that is
  // loaded (the full_sampler map holds it from then on).
  BpfSkeleton skeleton;
  std::unordered_map<uint64_t, uint32_t> cgroup_levels; // cgroup targets in the filter -> level
  std::unordered_set<uint32_t> pid_targets;
  uint32_t count_storage = 0;
  bool keep_unmatched = false;
  NoticeHandler on_notice;
  ring_buffer* notices = nullptr;
  PerfEvents events;
  std::vector<int> cpus;
  // The events sample only the targets (per cgroup and CPU, per thread), not every CPU.
  bool scoped = false;
  std::unique_ptr<BpfMapReader> reader;
  std::unique_ptr<BpfTableMaps> table_maps; // null when the unwinder is off
  // The program with the unwinder, loading on a thread of its own while the kernel verifies it:
  // meanwhile the pipeline reads the first processes and builds their tables. Last, so that it
  // is waited for before the maps it shares go away.
  std::future<Result<>> full_loading;

  ~State()
  {
    // Stop sampling before the maps go away.
    events = PerfEvents();
    if (notices)
      ring_buffer__free(notices);
  }
};

Sampler::Sampler(std::unique_ptr<State> state) : state_(std::move(state)) {}
Sampler::Sampler(Sampler&&) noexcept = default;
Sampler& Sampler::operator=(Sampler&&) noexcept = default;
Sampler::~Sampler() = default;

namespace {

// A map as the skeleton would have the kernel make it.
struct MapShape {
  bpf_map_type type;
  std::string name;
  uint32_t key_size;
  uint32_t value_size;
  uint32_t max_entries;
  uint32_t flags;
};

// The maps the kernel fills when it makes them (stack maps, preallocated hashes): a millisecond
// or more each, which the start spends before the first sample.
bool filled_when_made(const bpf_map* map)
{
  auto type = bpf_map__type(map);
  bool preallocated = type == BPF_MAP_TYPE_STACK_TRACE || type == BPF_MAP_TYPE_LRU_HASH ||
                      (type == BPF_MAP_TYPE_HASH && !(bpf_map__map_flags(map) & BPF_F_NO_PREALLOC));
  // What the kernel fills per entry, about: a hash element's header (48 bytes) and its key and
  // value rounded to 8 bytes; a stack's bucket header and its frames.
  auto rounded = [](uint64_t bytes) { return (bytes + 7) / 8 * 8; };
  uint64_t entry = type == BPF_MAP_TYPE_STACK_TRACE
                       ? 16 + uint64_t{bpf_map__value_size(map)}
                       : 48 + rounded(bpf_map__key_size(map)) + rounded(bpf_map__value_size(map));
  constexpr uint64_t kFilledBytes = 256 << 10;
  return preallocated && entry * bpf_map__max_entries(map) >= kFilledBytes;
}

// Makes those maps on threads of their own, and gives them to the skeleton, so that their
// filling overlaps the rest of the start instead of adding to it. Maps never given are closed
// once made.
class MapsMadeAhead {
public:
  explicit MapsMadeAhead(bpf_object* object)
  {
    bpf_map* map = nullptr;
    bpf_object__for_each_map(map, object)
    {
      if (!filled_when_made(map))
        continue;
      MapShape shape{bpf_map__type(map),       bpf_map__name(map),        bpf_map__key_size(map),
                     bpf_map__value_size(map), bpf_map__max_entries(map), bpf_map__map_flags(map)};
      made_.push_back({map, std::async(std::launch::async, [shape] {
                         LIBBPF_OPTS(bpf_map_create_opts, options, .map_flags = shape.flags);
                         return UniqueFd(bpf_map_create(shape.type, shape.name.c_str(),
                                                        shape.key_size, shape.value_size,
                                                        shape.max_entries, &options));
                       })});
    }
  }

  // Hands each map made to the skeleton; one that could not be made is left to libbpf, which
  // says why if it cannot make it either.
  void give_to_skeleton()
  {
    for (auto& [map, fd] : made_) {
      UniqueFd made = fd.get();
      if (made.valid() && bpf_map__reuse_fd(map, made.get()) != 0)
        spdlog::debug("map {}: made ahead but not taken; libbpf makes it", bpf_map__name(map));
    }
    made_.clear();
  }

private:
  std::vector<std::pair<bpf_map*, std::future<UniqueFd>>> made_;
};

// Loads the program with the unwinder on running's maps and puts it in running's full_sampler
// slot, which holds it (and it its maps) from then on: its own descriptors are closed when it
// returns, so that it costs no descriptor per map.
Result<> load_full_sampler(::sampler_bpf* running)
{
  auto started = std::chrono::steady_clock::now();
  BpfSkeleton full = BpfSkeleton::open(true);
  if (!full)
    return fail(system_error(errno, "cannot open the embedded BPF object"));
  // The same constants; every other map is the running program's own. Paired by their places in
  // the skeleton, which both share: a map made ahead has the kernel's name (cut to 15 bytes).
  *full->rodata = *running->rodata;
  const bpf_object_skeleton& full_table = *full->skeleton;
  const bpf_object_skeleton& running_table = *running->skeleton;
  auto map_at = [](const bpf_object_skeleton& table, int index) {
    const auto* entries = reinterpret_cast<const char*>(table.maps);
    return *reinterpret_cast<const bpf_map_skeleton*>(entries + index * table.map_skel_sz)->map;
  };
  int maps = 0;
  bpf_map* counted = nullptr;
  bpf_object__for_each_map(counted, full->obj)
  {
    ++maps;
  }
  if (maps != full_table.map_cnt)
    return fail(error("the sampler with the unwinder has maps its skeleton does not name"));
  for (int index = 0; index < full_table.map_cnt; ++index) {
    bpf_map* map = map_at(full_table, index);
    if (map == full->maps.rodata)
      continue;
    bpf_map* shared = map_at(running_table, index);
    if (int reused = bpf_map__reuse_fd(map, bpf_map__fd(shared)); reused != 0)
      return fail(system_error(-reused, std::string("cannot share the map ") + bpf_map__name(map)));
  }
  if (::sampler_bpf::load(full.get()) != 0) {
    auto failure = system_error(errno, "cannot load the BPF program");
    failure.message += log::verbose() ? "" : " (run with -v for libbpf's log)";
    return fail(failure);
  }
  uint32_t slot = 0;
  int program = bpf_program__fd(full->progs.sample_cpu);
  if (bpf_map_update_elem(bpf_map__fd(running->maps.full_sampler), &slot, &program, BPF_ANY) != 0)
    return fail(system_error(errno, "cannot hand the samples to the unwinding program"));
  auto now = std::chrono::steady_clock::now();
  std::chrono::duration<double> took = now - started;
  // steady_clock is CLOCK_MONOTONIC, the clock of the first sample's line.
  spdlog::debug("the unwinding program takes the samples from {:.6f} s monotonic on; it loaded in "
                "{:.3f} s",
                std::chrono::duration<double>(now.time_since_epoch()).count(), took.count());
  return {};
}

} // namespace

Result<Sampler> Sampler::start(const SamplerOptions& options, NoticeHandler on_notice)
{
  if (auto ok = check_privileges(); !ok)
    return fail(ok.error());
  if (auto ok = check_kernel_btf(); !ok)
    return fail(ok.error());
  // Read while the features are probed and the maps made: each adds to the time before the first
  // sample.
  auto offsets_read = std::async(std::launch::async, [] { return load_task_offsets(); });

  auto state = std::make_unique<State>();
  state->on_notice = std::move(on_notice);
  bool unwinder = options.unwind_memory >= sizeof(fb_unwind_row);
  if (unwinder) {
    if (auto supported = check_unwinder_support(); !supported) {
      spdlog::info("{}: stacks are unwound by frame pointers only", supported.error().message);
      unwinder = false;
    }
  }
  // The program without the unwinder first: the kernel verifies it in a few milliseconds, where
  // the full one takes tens, so sampling starts at once and the full one takes over when loaded.
  state->skeleton = BpfSkeleton::open(false);
  if (!state->skeleton)
    return fail(system_error(errno, "cannot open the embedded BPF object"));
  auto& maps = state->skeleton->maps;
  for (bpf_map* map : {maps.stacks_0, maps.stacks_1})
    bpf_map__set_max_entries(map, options.stack_storage);
  for (bpf_map* map : {maps.counts_0, maps.counts_1})
    bpf_map__set_max_entries(map, options.count_storage);
  state->skeleton->rodata->unwinder_enabled = unwinder ? 1 : 0;
  // The unwinder's maps take memory only when it runs.
  size_t rows = std::min<size_t>(options.unwind_memory / sizeof(fb_unwind_row), UINT32_MAX);
  size_t chunks = (rows + FB_ROW_CHUNK_ROWS - 1) / FB_ROW_CHUNK_ROWS;
  bpf_map__set_max_entries(maps.unwind_rows, unwinder ? static_cast<uint32_t>(chunks) : 1);
  for (bpf_map* map : {maps.ustacks_0, maps.ustacks_1})
    bpf_map__set_max_entries(map, unwinder ? options.stack_storage : 1);
  if (!unwinder) {
    bpf_map__set_max_entries(maps.image_mappings, 1);
    bpf_map__set_max_entries(maps.unwind_tables, 1);
  }
  // The maps whose entries come and go with the stacks and processes sampled take memory for
  // those entries only, where the kernel allows it.
  if (hash_maps_allocate_on_demand()) {
    for (bpf_map* map :
         {maps.counts_0, maps.counts_1, maps.ustacks_0, maps.ustacks_1, maps.image_mappings})
      bpf_map__set_map_flags(map, bpf_map__map_flags(map) | BPF_F_NO_PREALLOC);
  }
  MapsMadeAhead made_ahead(state->skeleton->obj);
  auto offsets = offsets_read.get();
  if (!offsets)
    return fail(offsets.error());
  auto* rodata = state->skeleton->rodata;
  rodata->task_mm_offset = offsets->mm;
  rodata->task_group_leader_offset = offsets->group_leader;
  rodata->task_comm_offset = offsets->comm;
  made_ahead.give_to_skeleton();
  if (::sampler_bpf::load(state->skeleton.get()) != 0) {
    auto failure = system_error(errno, "cannot load the BPF program");
    failure.message += log::verbose() ? "" : " (run with -v for libbpf's log)";
    return fail(failure);
  }
  state->skeleton->data->keep_unmatched = options.keep_unmatched ? 1 : 0;
  state->keep_unmatched = options.keep_unmatched;
  state->count_storage = options.count_storage;
  for (uint32_t pid : options.pids) {
    if (auto added = add_pid(state->skeleton.get(), pid); !added)
      return fail(added.error());
    state->pid_targets.insert(pid);
  }
  Sampler sampler(std::move(state));
  for (const auto& cgroup : options.cgroups) {
    if (auto added = sampler.add_cgroup_target(cgroup); !added) {
      // A container found among many is left out; a target the user named is not.
      if (options.explicit_targets)
        return fail(added.error());
      spdlog::warn("{}; it is not profiled", added.error().message);
    }
  }
  auto& started = *sampler.state_;

  started.notices =
      ring_buffer__new(bpf_map__fd(maps.notices), handle_notice, &started.on_notice, nullptr);
  if (!started.notices)
    return fail(system_error(errno, "cannot open the new-process ring buffer"));
  started.reader = std::make_unique<BpfMapReader>(started.skeleton.get());
  if (started.skeleton->rodata->unwinder_enabled)
    started.table_maps =
        std::make_unique<BpfTableMaps>(started.skeleton.get(), static_cast<uint32_t>(rows));

  auto cpus = procfs::online_cpus();
  if (!cpus)
    return fail(cpus.error());
  started.cpus = std::move(*cpus);
  sampler.share_count_map();
  if (auto attached = sampler.attach_events(options); !attached)
    return fail(attached.error());
  if (unwinder)
    started.full_loading = std::async(std::launch::async, [running = started.skeleton.get()] {
      return load_full_sampler(running);
    });
  return sampler;
}

Result<> Sampler::take_full_sampler()
{
  auto& loading = state_->full_loading;
  if (!loading.valid() || loading.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
    return {};
  return loading.get();
}

namespace {

// Events needed to sample only the targets, or nullopt when they cannot be scoped that way.
std::optional<size_t> scoped_event_count(const SamplerOptions& options, size_t cpu_count)
{
  if (!options.explicit_targets || options.keep_unmatched)
    return std::nullopt;
  size_t count = options.cgroups.size() * cpu_count;
  for (uint32_t pid : options.pids)
    count += procfs::thread_ids(pid).size();
  return count;
}

} // namespace

Result<> Sampler::attach_events(const SamplerOptions& options)
{
  auto& state = *state_;
  auto created = PerfEvents::create(state.skeleton->progs.sample_cpu, options.frequency_hz);
  if (!created)
    return fail(created.error());
  state.events = std::move(*created);
  auto scoped_count = scoped_event_count(options, state.cpus.size());
  if (scoped_count && *scoped_count <= kMaxScopedEvents) {
    auto scoped = [&]() -> Result<> {
      for (const auto& cgroup : options.cgroups) {
        if (!state.cgroup_levels.contains(cgroup.cgroup_id))
          continue; // left out of the filter
        if (auto ok = state.events.attach_cgroup(cgroup.cgroup_id, cgroup.path, state.cpus); !ok)
          return ok;
      }
      for (uint32_t pid : options.pids) {
        if (auto ok = state.events.attach_process(pid); !ok)
          return ok;
      }
      return {};
    }();
    if (scoped) {
      state.scoped = true;
      return {};
    }
    // E.g. a host whose perf_event controller is on a cgroup v1 hierarchy.
    spdlog::info("cannot sample the targets alone ({}); sampling every CPU and filtering",
                 scoped.error().message);
    state.events.detach_targets();
  } else if (scoped_count) {
    spdlog::debug("the targets would take {} perf events (over {}); sampling every CPU and "
                  "filtering",
                  *scoped_count, kMaxScopedEvents);
  }
  return state.events.attach_system_wide(state.cpus);
}

Result<> Sampler::add_cgroup_target(const CgroupFilter& cgroup)
{
  auto& skeleton = state_->skeleton;
  if (cgroup.level > FB_MAX_CGROUP_LEVEL)
    return fail(error("cgroup " +
                      (cgroup.path.empty() ? std::to_string(cgroup.cgroup_id) : cgroup.path) +
                      " is nested deeper than " + std::to_string(FB_MAX_CGROUP_LEVEL) +
                      " levels below the cgroup2 root"));
  uint8_t present = 1;
  if (bpf_map_update_elem(bpf_map__fd(skeleton->maps.cgroup_targets), &cgroup.cgroup_id, &present,
                          BPF_ANY) != 0)
    return fail(system_error(errno, "cannot add cgroup " + std::to_string(cgroup.cgroup_id) +
                                        " to the filter"));
  state_->cgroup_levels[cgroup.cgroup_id] = cgroup.level;
  share_count_map();
  // The entry exists before its level is searched, so the first sample there already matches.
  __atomic_or_fetch(&skeleton->bss->cgroup_level_mask, 1ULL << cgroup.level, __ATOMIC_SEQ_CST);
  __atomic_add_fetch(&skeleton->bss->filter_generation, 1u, __ATOMIC_SEQ_CST);
  if (state_->scoped) {
    if (auto attached = state_->events.attach_cgroup(cgroup.cgroup_id, cgroup.path, state_->cpus);
        !attached) {
      // A container that stopped again at once: the next refresh drops it.
      spdlog::warn("{}", attached.error().message);
    }
  }
  return {};
}

void Sampler::remove_cgroup_target(uint64_t cgroup_id)
{
  auto& skeleton = state_->skeleton;
  bpf_map_delete_elem(bpf_map__fd(skeleton->maps.cgroup_targets), &cgroup_id);
  state_->cgroup_levels.erase(cgroup_id);
  share_count_map();
  state_->events.detach_cgroup(cgroup_id);
  uint64_t mask = 0;
  for (const auto& [id, level] : state_->cgroup_levels)
    mask |= 1ULL << level;
  __atomic_store_n(&skeleton->bss->cgroup_level_mask, mask, __ATOMIC_SEQ_CST);
  __atomic_add_fetch(&skeleton->bss->filter_generation, 1u, __ATOMIC_SEQ_CST);
}

void Sampler::remove_pid_target(uint32_t pid)
{
  bpf_map_delete_elem(bpf_map__fd(state_->skeleton->maps.pid_targets), &pid);
  state_->pid_targets.erase(pid);
  share_count_map();
  state_->events.detach_process(pid);
}

void Sampler::share_count_map()
{
  auto& state = *state_;
  // The host outside every target is shared per process, as one target.
  size_t shares = state.cgroup_levels.size() + state.pid_targets.size() + state.keep_unmatched;
  uint32_t limit = 0;
  if (shares > 1)
    limit = std::max<uint32_t>(state.count_storage / static_cast<uint32_t>(shares),
                               state.count_storage / kCountMapFloorDivisor);
  __atomic_store_n(&state.skeleton->bss->target_entry_limit, limit, __ATOMIC_SEQ_CST);
}

Result<> Sampler::poll_notices(std::chrono::milliseconds timeout)
{
  int rc = ring_buffer__poll(state_->notices, static_cast<int>(timeout.count()));
  if (rc < 0 && rc != -EINTR)
    return fail(system_error(-rc, "cannot read new-process notices"));
  return {};
}

void Sampler::forget_image(uint32_t tgid, uint32_t image_id)
{
  fb_image_key key{tgid, image_id};
  bpf_map_delete_elem(bpf_map__fd(state_->skeleton->maps.known_procs), &key);
  // A CPU that announced this image last would otherwise skip it when the pid is reused.
  __atomic_add_fetch(&state_->skeleton->bss->image_generation, 1ull, __ATOMIC_SEQ_CST);
}

namespace {

// Entries in a bookkeeping map; 0, after a debug message, if it cannot be listed.
template <class Key> size_t count_entries(bpf_map* map, const std::string& what)
{
  auto keys = map_keys<Key>(bpf_map__fd(map), what);
  if (!keys) {
    spdlog::debug("{}", keys.error().message);
    return 0;
  }
  return keys->size();
}

} // namespace

MapOccupancy Sampler::occupancy() const
{
  const auto& maps = state_->skeleton->maps;
  MapOccupancy occupancy;
  occupancy.known_images = count_entries<fb_image_key>(maps.known_procs, "the known images");
  occupancy.cgroup_targets = count_entries<uint64_t>(maps.cgroup_targets, "the cgroup targets");
  occupancy.pid_targets = count_entries<uint32_t>(maps.pid_targets, "the pid targets");
  return occupancy;
}

size_t Sampler::map_memory_bytes() const
{
  auto memory_of = [](int fd) -> size_t {
    auto info = procfs::read_file("/proc/self/fdinfo/" + std::to_string(fd), 4096);
    if (!info)
      return 0;
    // fdinfo's lines are "<field>:\t<value>", as in a status file.
    auto line = procfs::status_line(*info, "memlock");
    auto fields = line ? text::split_fields(*line) : std::vector<std::string_view>{};
    return fields.empty() ? 0 : text::parse_number<size_t>(fields[0]).value_or(0);
  };
  size_t total = 0;
  bpf_map* map = nullptr;
  bpf_object__for_each_map(map, state_->skeleton->obj) total += memory_of(bpf_map__fd(map));
  if (state_->table_maps) {
    for (int fd : state_->table_maps->chunk_fds())
      total += memory_of(fd);
  }
  return total;
}

unwind::TableMaps* Sampler::table_maps()
{
  return state_->table_maps.get();
}

std::vector<fb_image_key> Sampler::missed_images() const
{
  std::vector<fb_image_key> missed;
  if (!state_->table_maps)
    return missed;
  int fd = bpf_map__fd(state_->skeleton->maps.image_mappings);
  auto keys = map_keys<fb_image_key>(fd, "the unwind mappings");
  if (!keys) {
    spdlog::debug("{}", keys.error().message);
    return missed;
  }
  auto mappings = std::make_unique<fb_image_mappings>();
  for (const auto& key : *keys) {
    if (bpf_map_lookup_elem(fd, &key, mappings.get()) == 0 && mappings->missed)
      missed.push_back(key);
  }
  return missed;
}

drain::MapReader& Sampler::map_reader()
{
  return *state_->reader;
}

std::string Sampler::scope() const
{
  const auto& state = *state_;
  return std::string(state.scoped ? "only the targets on " : "") +
         std::to_string(state.cpus.size()) + " CPUs (" +
         std::to_string(state.events.event_count()) + " perf events)";
}

} // namespace flamebpf::sampler
