#include "sampler/perf_events.h"

#include <cerrno>
#include <linux/perf_event.h>
#include <string>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"

namespace flamebpf::sampler {

PerfEvents::~PerfEvents()
{
  for (auto* link : links_)
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
  int last_errno = 0;
  for (int cpu : cpus) {
    int fd =
        static_cast<int>(syscall(SYS_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC));
    if (fd < 0) {
      last_errno = errno;
      // ENODEV: the CPU went offline after the online list was read.
      if (errno == ENODEV) {
        spdlog::debug("CPU {} is offline; not sampled", cpu);
        continue;
      }
      if (errno == EINVAL) {
        auto failure =
            system_error(errno, "cannot sample at " + std::to_string(frequency_hz) + " Hz");
        failure.message += "; choose a -F below /proc/sys/kernel/perf_event_max_sample_rate";
        failure.usage = true;
        return fail(failure);
      }
      return fail(system_error(errno, "cannot open the cpu-clock perf event on CPU " +
                                          std::to_string(cpu)));
    }
    events.event_fds_.emplace_back(fd);
    bpf_link* link = bpf_program__attach_perf_event(program, fd);
    if (!link)
      return fail(
          system_error(errno, "cannot attach the sampling program to CPU " + std::to_string(cpu)));
    events.links_.push_back(link);
    events.cpus_.push_back(cpu);
  }
  if (events.cpus_.empty())
    return fail(system_error(last_errno ? last_errno : ENODEV, "no CPU could be sampled"));
  return events;
}

} // namespace flamebpf::sampler
