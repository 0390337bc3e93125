#include "sampler/perf_events.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <string>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"
#include "common/procfs.h"
#include "common/text.h"
#include "common/unique_fd.h"

namespace flamebpf::sampler {

void PerfEvents::LinkDestroyer::operator()(bpf_link* link) const
{
  bpf_link__destroy(link);
}

Result<PerfEvents> PerfEvents::create(bpf_program* program, uint32_t frequency_hz)
{
  if (auto limit = procfs::read_file("/proc/sys/kernel/perf_event_max_sample_rate", 64)) {
    std::string_view digits = *limit;
    unsigned long max_rate = text::take_number<unsigned long>(digits).value_or(0);
    if (max_rate > 0 && frequency_hz > max_rate) {
      Error failure = usage_error("cannot sample at " + std::to_string(frequency_hz) +
                                  " Hz: the kernel allows at most " + std::to_string(max_rate) +
                                  " (/proc/sys/kernel/perf_event_max_sample_rate); choose a "
                                  "lower -F");
      return fail(failure);
    }
  }
  PerfEvents events;
  events.program_ = program;
  events.frequency_hz_ = frequency_hz;
  return events;
}

Result<bool>
PerfEvents::open_one(int pid, int cpu, unsigned long flags, Links& links, const char* what)
{
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_CPU_CLOCK;
  attr.freq = 1;
  attr.sample_freq = frequency_hz_;
  // A per-thread event follows the threads and processes that thread starts later.
  attr.inherit = (flags & PERF_FLAG_PID_CGROUP) == 0 && pid != -1;
  int fd = static_cast<int>(
      syscall(SYS_perf_event_open, &attr, pid, cpu, -1, flags | PERF_FLAG_FD_CLOEXEC));
  if (fd < 0) {
    // ENODEV: the CPU went offline after the online list was read; EINVAL: a CPU the kernel
    // does not know; ESRCH: the thread exited. Either way the others are sampled.
    if (errno == ENODEV || errno == EINVAL || errno == ESRCH)
      return false;
    return fail(system_error(errno, std::string("cannot open the cpu-clock perf event ") + what));
  }
  UniqueFd event(fd);
  bpf_link* link = bpf_program__attach_perf_event(program_, event.get());
  if (!link)
    return fail(system_error(errno, std::string("cannot attach the sampling program ") + what));
  // The link closes the event when it is destroyed.
  event.release();
  links.emplace_back(link);
  return true;
}

Result<> PerfEvents::attach_system_wide(const std::vector<int>& cpus)
{
  int last_errno = ENODEV;
  for (int cpu : cpus) {
    std::string what = "on CPU " + std::to_string(cpu);
    auto opened = open_one(-1, cpu, 0, system_wide_, what.c_str());
    if (!opened)
      return fail(opened.error());
    if (!*opened) {
      last_errno = errno;
      spdlog::warn("CPU {} cannot be sampled ({}); profiling the other CPUs", cpu,
                   std::strerror(errno));
    }
  }
  if (system_wide_.empty())
    return fail(system_error(last_errno, "no CPU could be sampled"));
  return {};
}

Result<> PerfEvents::attach_cgroup(uint64_t cgroup_id,
                                   const std::string& cgroup_path,
                                   const std::vector<int>& cpus)
{
  UniqueFd directory(::open(cgroup_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!directory.valid())
    return fail(system_error(errno, "cannot open cgroup " + cgroup_path));
  Links links;
  for (int cpu : cpus) {
    std::string what = "for cgroup " + cgroup_path + " on CPU " + std::to_string(cpu);
    auto opened = open_one(directory.get(), cpu, PERF_FLAG_PID_CGROUP, links, what.c_str());
    if (!opened)
      return fail(opened.error());
  }
  if (links.empty())
    return fail(error("no CPU could be sampled for cgroup " + cgroup_path));
  cgroups_[cgroup_id] = std::move(links);
  return {};
}

Result<> PerfEvents::attach_process(uint32_t pid)
{
  Links links;
  // One listing, as perf record -p does: a thread started after its creator's event opened
  // inherits it, so only threads started by a not-yet-covered thread during these few
  // microseconds are missed; opening events for them too could sample a thread twice.
  for (uint32_t tid : procfs::thread_ids(pid)) {
    std::string what = "for thread " + std::to_string(tid) + " of process " + std::to_string(pid);
    auto opened = open_one(static_cast<int>(tid), -1, 0, links, what.c_str());
    if (!opened)
      return fail(opened.error());
  }
  if (links.empty())
    return fail(system_error(ESRCH, "cannot sample process " + std::to_string(pid)));
  processes_[pid] = std::move(links);
  return {};
}

void PerfEvents::detach_cgroup(uint64_t cgroup_id)
{
  cgroups_.erase(cgroup_id);
}

void PerfEvents::detach_process(uint32_t pid)
{
  processes_.erase(pid);
}

void PerfEvents::detach_targets()
{
  cgroups_.clear();
  processes_.clear();
}

size_t PerfEvents::event_count() const
{
  size_t count = system_wide_.size();
  for (const auto& [id, links] : cgroups_)
    count += links.size();
  for (const auto& [pid, links] : processes_)
    count += links.size();
  return count;
}

} // namespace flamebpf::sampler
