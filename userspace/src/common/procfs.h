// Readers of /proc and /sys text files. Each takes the file's text or a root path, so tests can
// feed fixtures from tests/data instead of the live system.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace flamebpf::procfs {

// One line of /proc/<pid>/mountinfo.
struct MountEntry {
  std::string root;        // the mounted subtree of the filesystem ("/" for a whole filesystem)
  std::string mount_point; // where it is mounted, octal escapes decoded
  std::string fs_type;     // e.g. "cgroup2", "ext4"
  std::string source;      // the mount source, e.g. "cgroup2"
};

// Parses mountinfo text; malformed lines are skipped.
std::vector<MountEntry> parse_mountinfo(std::string_view text);

// The mount point of the cgroup2 hierarchy in mountinfo text: "/sys/fs/cgroup" on unified hosts,
// "/sys/fs/cgroup/unified" on hybrid ones. Prefers a mount of the hierarchy's root.
std::optional<std::string> find_cgroup2_mount(const std::vector<MountEntry>& mounts);

// Reads the cgroup2 mount point of this process from <proc_root>/self/mountinfo.
Result<std::string> cgroup2_mount(const std::string& proc_root = "/proc");

// Parses a kernel CPU list such as "0-3,8,10-11" (sysfs "online"/"possible").
Result<std::vector<int>> parse_cpu_list(std::string_view text);

// CPUs listed in <sys_root>/devices/system/cpu/online that are also possible CPUs
// (<sys_root>/devices/system/cpu/possible): a CPU listed online that the kernel cannot have is
// left out rather than trusted.
Result<std::vector<int>> online_cpus(const std::string& sys_root = "/sys");

// Reads at most max_bytes of a file. Reads the whole file (up to the cap) even for /proc files
// that report size 0.
Result<std::string> read_file(const std::string& path, size_t max_bytes = 64 << 20);

// Process name (comm) of pid from <proc_root>/<pid>/comm, without the trailing newline.
std::optional<std::string> read_comm(uint32_t pid, const std::string& proc_root = "/proc");

// The process (thread-group) id of a task id, from <proc_root>/<tid>/status; nullopt if the task
// does not exist.
std::optional<uint32_t> read_tgid(uint32_t tid, const std::string& proc_root = "/proc");

// The thread ids of process pid, from <proc_root>/<pid>/task; empty if the process is gone.
std::vector<uint32_t> thread_ids(uint32_t pid, const std::string& proc_root = "/proc");

// The pid of a process inside its own (innermost) pid namespace: the last NSpid entry of
// <proc_root>/<pid>/status; nullopt if the process does not exist.
std::optional<uint32_t> read_ns_pid(uint32_t pid, const std::string& proc_root = "/proc");

// The cgroup2 path in the text of /proc/<pid>/cgroup: the path of its "0::" line, e.g.
// "/docker/<id>" (paths may hold ':'); nullopt if there is no such line with an absolute path.
// The v1 hierarchies' lines are ignored: flamebpf follows processes by their cgroup2 path only.
std::optional<std::string> parse_cgroup2_path(std::string_view cgroup);

// The cgroup2 path of a process (parse_cgroup2_path of <proc_root>/<pid>/cgroup); nullopt if the
// process is gone or has none.
std::optional<std::string> read_cgroup2_path(uint32_t pid, const std::string& proc_root = "/proc");

// When a process started (field 22 of /proc/<pid>/stat, in clock ticks after boot), which with
// its pid names one process for good: a pid reused later has another. nullopt if the process is
// gone or a zombie.
std::optional<uint64_t> live_start_time(uint32_t pid, const std::string& proc_root = "/proc");

// The same from the text of /proc/<pid>/stat.
std::optional<uint64_t> live_start_time_in_stat(std::string_view stat);

// utime + stime (fields 14 and 15) of /proc/<pid>/stat text, in clock ticks (sysconf(_SC_CLK_TCK)
// a second): the CPU time of every thread of the process, those that exited included. nullopt if
// the text is malformed.
std::optional<uint64_t> cpu_ticks_in_stat(std::string_view stat);

// usage_usec of a cgroup2 cpu.stat text ("usage_usec 1234\nuser_usec ..."): the CPU time of every
// task of the cgroup and its descendants, in microseconds. Only lines ending in a newline count
// (a read cut short may end in a partial one); nullopt if there is no such line or its value is
// no number.
std::optional<uint64_t> cgroup_cpu_usage_usec(std::string_view cpu_stat);

// What follows the colon of the line "<field>:\t<values…>" of /proc/<pid>/status text; nullopt if
// there is no such line.
std::optional<std::string_view> status_line(std::string_view status, std::string_view field);

// Value number index (0 first, -1 last) of the line "<field>:\t<values…>" of /proc/<pid>/status
// text, e.g. ("Uid", 1) for the effective uid or ("NSpid", -1); nullopt if missing or malformed
// (any value of the line that is not a decimal uint32 makes it malformed).
std::optional<uint32_t>
status_field(std::string_view status, std::string_view field, int index = 0);

// Whether the process whose /proc/<pid>/status text this is handles signal with a handler of its
// own: its SigCgt mask has it and its SigIgn mask does not (a missing mask is empty). false if
// either mask is malformed.
bool catches_signal(std::string_view status, int signal);

} // namespace flamebpf::procfs
