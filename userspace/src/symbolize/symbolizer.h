// The symbolize stage: turns a RawProfile's addresses into named frames.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/result.h"
#include "profile/raw_profile.h"
#include "profile/symbolized_profile.h"
#include "profile/target_names.h"
#include "symbolize/kernel_names.h"
#include "symbolize/process_table.h"

namespace flamebpf::symbolize {

struct SymbolizerOptions {
  bool java_signatures = false; // Java frames with their parameter types
};

// A process image found to be a JVM.
struct JvmFound {
  ImageKey key;
  bool keeps_perf_map = false; // an agent that keeps its perf map current is loaded
  std::string cgroup;          // its cgroup2 path, as ProcessImage::cgroup
};

class Symbolizer {
public:
  explicit Symbolizer(std::unique_ptr<KernelNames> kernel,
                      SymbolizerOptions options = {},
                      std::string proc_root = "/proc");

  // Records a process on its first sample, while it still runs.
  const ProcessImage& on_process_seen(const ImageKey& key, const std::string& comm);

  // The JVMs found since the last call, each image once: on its first sample, or later when the
  // launcher was sampled before it loaded the VM.
  std::vector<JvmFound> take_new_jvms();

  // Names every frame of raw, and each stack's target from targets. Stacks come out root first:
  // user frames then kernel frames.
  [[nodiscard]] Result<profile::SymbolizedProfile> symbolize(const profile::RawProfile& raw,
                                                             const profile::TargetNames& targets);

  // The JIT perf maps being read, for statistics.
  std::vector<PerfMapStatus> perf_maps() const { return processes_.perf_maps(); }

  // Reads JVMs' perf maps as they grow, between intervals (see ProcessTable::poll_perf_maps).
  void poll_perf_maps() { processes_.poll_perf_maps(); }

  // Processes remembered and ELF files held open, for statistics.
  size_t processes() const { return processes_.size(); }
  size_t elf_files() const { return processes_.elf_files(); }

  // Forgets processes that exited; returns their pids so the sampler can forget them too.
  std::vector<ImageKey> forget_exited_processes();

private:
  profile::Frame kernel_frame(uint64_t address) const;
  // Appends the frames of one user address: one, or several for JIT code with inlined methods;
  // notes build IDs and what could not be named in profile.
  void add_user_frames(const ImageKey& key,
                       uint64_t address,
                       std::vector<profile::Frame>& out,
                       profile::SymbolizedProfile& profile);

  std::unique_ptr<KernelNames> kernel_;
  SymbolizerOptions options_;
  ProcessTable processes_;
};

} // namespace flamebpf::symbolize
