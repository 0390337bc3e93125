// Turns a --cgroup argument into the cgroup2 directory the kernel filter matches.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"

namespace flamebpf::target {

struct CgroupTarget {
  std::string path;       // absolute path of the cgroup2 directory
  std::string name;       // for outputs: the path below the cgroup2 mount, e.g. "docker/4f3c…"
  uint64_t cgroup_id = 0; // the kernel's cgroup id (the directory's inode number)
  uint32_t level = 0;     // depth below the cgroup2 root; the root itself is 0
};

// The kernel's id of the cgroup2 directory at path: what bpf_get_current_cgroup_id() returns for
// tasks in it.
[[nodiscard]] Result<uint64_t> cgroup_id_of(const std::string& path);

// The path of `relative` below mount (both normalized), or nullopt-like empty string if path does
// not lie under mount.
std::string relative_to_mount(const std::string& path, const std::string& mount);

// Resolves argument, an absolute cgroup2 path or one relative to cgroup2_mount.
[[nodiscard]] Result<CgroupTarget> resolve_cgroup(const std::string& argument,
                                                  const std::string& cgroup2_mount);

} // namespace flamebpf::target
