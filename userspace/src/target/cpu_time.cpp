#include "target/cpu_time.h"

#include <unistd.h>

#include "common/procfs.h"

namespace flamebpf::target {

Result<double> cpu_seconds_used(const Target& target, const std::string& proc_root)
{
  if (target.pid != 0) {
    std::string path = proc_root + "/" + std::to_string(target.pid) + "/stat";
    auto stat = procfs::read_file(path, kMaxCpuStatBytes);
    if (!stat)
      return fail(stat.error());
    auto ticks = procfs::cpu_ticks_in_stat(*stat);
    long ticks_per_second = ::sysconf(_SC_CLK_TCK);
    if (!ticks || ticks_per_second <= 0)
      return fail(error(path + " has no CPU times (utime, stime) where they belong"));
    return static_cast<double>(*ticks) / static_cast<double>(ticks_per_second);
  }
  std::string path = target.cgroup_path + "/cpu.stat";
  auto stat = procfs::read_file(path, kMaxCpuStatBytes);
  if (!stat)
    return fail(stat.error());
  auto usec = procfs::cgroup_cpu_usage_usec(*stat);
  if (!usec)
    return fail(error(path + " has no usage_usec line with a number"));
  return static_cast<double>(*usec) / 1e6;
}

} // namespace flamebpf::target
