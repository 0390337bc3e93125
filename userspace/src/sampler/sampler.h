// The sampling stage: loads the BPF program, installs the target filter, and runs one cpu-clock
// perf event per CPU. Owns the kernel side; the drain stage reads it through map_reader().
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bpf_abi.h"
#include "common/result.h"
#include "drain/map_reader.h"
#include "unwind/table_maps.h"

namespace flamebpf::sampler {

// A --cgroup target as the kernel filter sees it.
struct CgroupFilter {
  uint64_t cgroup_id = 0; // inode number of the cgroup2 directory
  uint32_t level = 0;     // depth below the cgroup2 root (root = 0)
  std::string path;       // the cgroup2 directory, for perf events scoped to it
};

// Perf events the sampler may open on the targets themselves (CPUs x cgroup targets + threads of
// process targets) instead of one per CPU for the whole host. Beyond it, every CPU is sampled
// and the BPF program filters: each event costs the kernel memory, a descriptor, and work at
// every context switch into or out of its cgroup or thread.
inline constexpr size_t kMaxScopedEvents = 256;

// Each target may add at most its part of a buffer's count map (count_storage divided among the
// targets, at least this fraction of it), so that one target's many stacks and processes cannot
// crowd the others' samples out; the rest of its samples are counted as lost.
inline constexpr uint32_t kCountMapFloorDivisor = 16;

struct SamplerOptions {
  uint32_t frequency_hz = 99;
  uint32_t stack_storage = 8192;  // stack map entries per buffer
  uint32_t count_storage = 16384; // count map entries per buffer
  // Bytes of the unwind-row array that all tables share (--unwind-memory); 0 turns the table
  // unwinder off.
  size_t unwind_memory = size_t{32} << 20;
  bool keep_unmatched = true; // keep samples of no target (the whole host, or "host")
  // The targets are the ones named on the command line, not every container: few enough, they
  // are sampled by events of their own, so that nothing else on the host is interrupted.
  bool explicit_targets = false;
  std::vector<uint32_t> pids; // --pid targets (host pids)
  std::vector<CgroupFilter> cgroups;
};

// How full the kernel's bookkeeping maps are, for the agent's statistics.
struct MapOccupancy {
  size_t known_images = 0;   // process images announced (known_procs)
  size_t cgroup_targets = 0; // cgroups in the filter
  size_t pid_targets = 0;    // --pid targets in the filter
};

class Sampler {
public:
  using NoticeHandler = std::function<void(const fb_process_notice&)>;

  Sampler(Sampler&&) noexcept;
  Sampler& operator=(Sampler&&) noexcept;
  ~Sampler();

  // Checks privileges and BTF, loads the program, installs the filter and starts sampling.
  // on_notice is called from poll_notices() for the first sample of each process. Sampling starts
  // with the program built without the unwinder; the one with it loads meanwhile, on a thread of
  // its own, and takes the samples once loaded.
  [[nodiscard]] static Result<Sampler> start(const SamplerOptions& options,
                                             NoticeHandler on_notice);
  // The outcome of loading the unwinding program, once known: a failure ends the recording, as a
  // failure to load at start would. Cheap: called at every wake.
  [[nodiscard]] Result<> take_full_sampler();

  // Delivers pending new-process notices; waits up to timeout for the first one. Returns early
  // (without error) when a signal interrupts the wait.
  [[nodiscard]] Result<> poll_notices(std::chrono::milliseconds timeout);

  // Adds a cgroup target to the kernel filter (a container that started).
  [[nodiscard]] Result<> add_cgroup_target(const CgroupFilter& cgroup);
  // Removes a cgroup target from the kernel filter (a container that stopped).
  void remove_cgroup_target(uint64_t cgroup_id);
  // Removes a --pid target (a process that exited), so that a process reusing its pid is not
  // profiled in its place.
  void remove_pid_target(uint32_t pid);

  // Lets the next sample of this process image announce it again (after it exited, its pid may
  // be reused).
  void forget_image(uint32_t tgid, uint32_t image_id);

  // Counts the entries of the bookkeeping maps (not the per-interval buffers, which the drain
  // empties).
  MapOccupancy occupancy() const;

  // Kernel memory charged to the sampler's BPF maps (their memlock), in bytes.
  size_t map_memory_bytes() const;

  // The unwind tables' maps, for the unwind stage; null when the unwinder is off (the kernel
  // lacks what it needs, or --unwind-memory is 0).
  unwind::TableMaps* table_maps();
  // Process images whose samples met a pc outside their installed mappings since their mappings
  // were last installed.
  std::vector<fb_image_key> missed_images() const;

  // The BPF maps, for the drain stage.
  drain::MapReader& map_reader();

  // What the perf events sample, for the log: "2 CPUs (2 perf events)", or "only the targets on
  // 2 CPUs (2 perf events)".
  std::string scope() const;

private:
  struct State;
  explicit Sampler(std::unique_ptr<State> state);
  // Opens and attaches the perf events: on the targets alone when options allow, else on every
  // CPU.
  [[nodiscard]] Result<> attach_events(const SamplerOptions& options);
  // Sets each target's part of the count map for the targets there are now.
  void share_count_map();
  std::unique_ptr<State> state_;
};

} // namespace flamebpf::sampler
