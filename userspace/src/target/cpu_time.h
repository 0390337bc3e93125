// The CPU time a target has used, as the kernel accounts it: a cgroup target's from its cgroup2
// cpu.stat (usage_usec, which counts every process of the cgroup and of those below it), a process
// target's from /proc/<pid>/stat (utime + stime, every thread's). Set against the target's
// samples, it says whether its profile adds up (profile/coverage.h).
#pragma once

#include <string>

#include "common/result.h"
#include "target/resolver.h"

namespace flamebpf::target {

// The most of cpu.stat or /proc/<pid>/stat read: either is a few hundred bytes.
inline constexpr size_t kMaxCpuStatBytes = 4096;

// The CPU time target has used since its cgroup or process began, in seconds, read from
// <target.cgroup_path>/cpu.stat or <proc_root>/<target.pid>/stat. Fails with one line saying
// which file could not be read or parsed (errno ENOENT: the cgroup or process is gone).
[[nodiscard]] Result<double> cpu_seconds_used(const Target& target,
                                              const std::string& proc_root = "/proc");

} // namespace flamebpf::target
