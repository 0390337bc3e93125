// The cpu-clock perf events that run the sampling program. They sample either every CPU
// (system-wide: the program filters) or, for a handful of targets, only the targets themselves:
// per CPU in cgroup mode for a cgroup, per thread for a process. A CPU running anything else is
// then never interrupted.
#pragma once

#include <bpf/libbpf.h>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"

namespace flamebpf::sampler {

class PerfEvents {
public:
  PerfEvents() = default;
  PerfEvents(PerfEvents&&) noexcept = default;
  PerfEvents& operator=(PerfEvents&&) noexcept = default;
  PerfEvents(const PerfEvents&) = delete;
  PerfEvents& operator=(const PerfEvents&) = delete;
  ~PerfEvents() = default;

  // Events that will run program at frequency_hz; a frequency above the kernel's limit is a
  // usage error here rather than EINVAL on every CPU later.
  [[nodiscard]] static Result<PerfEvents> create(bpf_program* program, uint32_t frequency_hz);

  // One event per CPU in cpus, sampling whatever runs there. CPUs that went offline meanwhile
  // are skipped; failing on all CPUs is an error.
  [[nodiscard]] Result<> attach_system_wide(const std::vector<int>& cpus);
  // One event per CPU in cpus, counting only while a task of the cgroup2 directory cgroup_path
  // (or of a cgroup below it) runs.
  [[nodiscard]] Result<>
  attach_cgroup(uint64_t cgroup_id, const std::string& cgroup_path, const std::vector<int>& cpus);
  // One event per thread of process pid, inherited by the threads and children it starts later.
  [[nodiscard]] Result<> attach_process(uint32_t pid);
  void detach_cgroup(uint64_t cgroup_id);
  void detach_process(uint32_t pid);
  // Closes every cgroup and process event, as if none had been attached.
  void detach_targets();

  // Open events: the cost the kernel carries for them.
  size_t event_count() const;

private:
  struct LinkDestroyer {
    void operator()(bpf_link* link) const;
  };
  // Each link owns its perf event's descriptor and closes it; owned here so that moving a
  // PerfEvents over another detaches the other's program.
  using Links = std::vector<std::unique_ptr<bpf_link, LinkDestroyer>>;

  // Opens an event for (pid, cpu) with flags and attaches the program: ENODEV/EINVAL/ESRCH
  // (a CPU or thread that went away) leave links unchanged and return false.
  Result<bool> open_one(int pid, int cpu, unsigned long flags, Links& links, const char* what);

  bpf_program* program_ = nullptr;
  uint32_t frequency_hz_ = 0;
  Links system_wide_;
  std::map<uint64_t, Links> cgroups_;
  std::map<uint32_t, Links> processes_;
};

} // namespace flamebpf::sampler
