#include "sampler/perf_events.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <linux/perf_event.h>
#include <string>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"
#include "common/procfs.h"

namespace flamebpf::sampler {

void PerfEvents::LinkDestroyer::operator()(bpf_link* link) const
{
  bpf_link__destroy(link);
}

Result<PerfEvents> PerfEvents::open_and_attach(bpf_program* program,
                                               const std::vector<int>& cpus,
                                               uint32_t frequency_hz)
{
  PerfEvents events;
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_CPU_CLOCK;
  attr.freq = 1;
  attr.sample_freq = frequency_hz;
  // A frequency above the kernel's limit fails every CPU with EINVAL: say so before trying.
  if (auto limit = procfs::read_file("/proc/sys/kernel/perf_event_max_sample_rate", 64)) {
    unsigned long max_rate = std::strtoul(limit->c_str(), nullptr, 10);
    if (max_rate > 0 && frequency_hz > max_rate) {
      Error failure = usage_error("cannot sample at " + std::to_string(frequency_hz) +
                                  " Hz: the kernel allows at most " + std::to_string(max_rate) +
                                  " (/proc/sys/kernel/perf_event_max_sample_rate); choose a "
                                  "lower -F");
      return fail(failure);
    }
  }
  int last_errno = 0;
  for (int cpu : cpus) {
    int fd =
        static_cast<int>(syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC));
    if (fd < 0) {
      last_errno = errno;
      // ENODEV: the CPU went offline after the online list was read; EINVAL: a CPU the kernel
      // does not know. Either way the others are sampled.
      if (errno == ENODEV || errno == EINVAL) {
        spdlog::warn("CPU {} cannot be sampled ({}); profiling the other CPUs", cpu,
                     std::strerror(errno));
        continue;
      }
      return fail(system_error(errno, "cannot open the cpu-clock perf event on CPU " +
                                          std::to_string(cpu)));
    }
    UniqueFd event(fd);
    bpf_link* link = bpf_program__attach_perf_event(program, event.get());
    if (!link)
      return fail(
          system_error(errno, "cannot attach the sampling program to CPU " + std::to_string(cpu)));
    // The link closes the event when it is destroyed.
    event.release();
    events.links_.emplace_back(link);
    events.cpus_.push_back(cpu);
  }
  if (events.cpus_.empty())
    return fail(system_error(last_errno ? last_errno : ENODEV, "no CPU could be sampled"));
  return events;
}

} // namespace flamebpf::sampler
