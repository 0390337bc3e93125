// Which target each sample belongs to, by name: plain data handed to the symbolize stage.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace flamebpf::profile {

struct TargetNames {
  std::unordered_map<uint64_t, std::string> by_cgroup; // target cgroup id -> name
  std::unordered_map<uint32_t, std::string> by_pid;    // --pid target (host pid) -> name
  // Cgroup targets by their cgroup2 path below the mount ("/docker/<id>"): a sample the kernel
  // matched to no target, taken before a new container's cgroup joined the filter, still
  // belongs to the target whose cgroup its process was in.
  std::vector<std::pair<std::string, std::string>> by_cgroup_path;
  // The containers of Kubernetes pods profiled as one target (--cgroup <namespace>/<pod>), by
  // their cgroup2 path below the mount -> container ID: which container of the pod a sample is
  // from, for its labels.
  std::vector<std::pair<std::string, std::string>> pod_containers_by_cgroup_path;
  std::string unmatched = "host"; // samples of no target: the host outside every container
};

// Where a process was when sampled: its cgroup2 path as read from /proc ("" when it exited before
// it could be read) and the cgroup2 id its first sample was taken in (0 if not known).
struct ProcessCgroup {
  std::string_view path;
  uint64_t id = 0;
};

// The name of the target a sample belongs to: the one the kernel matched (target_cgroup_id, 0 for
// none), the process's own --pid target, else the cgroup target the process was in (the deepest
// containing its path, as the kernel would have matched it), else targets.unmatched.
const std::string& target_of(const TargetNames& targets,
                             uint64_t target_cgroup_id,
                             uint32_t tgid,
                             ProcessCgroup process_cgroup);

// The ID of the container of a pod target that a process's cgroup2 path is in, "" if none.
const std::string& pod_container_of(const TargetNames& targets, std::string_view process_path);

} // namespace flamebpf::profile
