#include "profile/target_names.h"

namespace flamebpf::profile {

const std::string& target_of(const TargetNames& targets,
                             uint64_t target_cgroup_id,
                             uint32_t tgid,
                             ProcessCgroup process_cgroup)
{
  if (target_cgroup_id != 0) {
    if (auto it = targets.by_cgroup.find(target_cgroup_id); it != targets.by_cgroup.end())
      return it->second;
  } else if (auto it = targets.by_pid.find(tgid); it != targets.by_pid.end()) {
    return it->second;
  }
  // Sampled before its container joined the kernel's filter: the cgroup it was in decides.
  if (auto it = targets.by_cgroup.find(process_cgroup.id);
      process_cgroup.id != 0 && it != targets.by_cgroup.end())
    return it->second;
  std::string_view process_path = process_cgroup.path;
  const std::string* best = nullptr;
  size_t best_length = 0;
  for (const auto& [path, name] : targets.by_cgroup_path) {
    bool inside = process_path == path ||
                  (process_path.starts_with(path) && process_path[path.size()] == '/');
    if (inside && path.size() > best_length) {
      best = &name;
      best_length = path.size();
    }
  }
  return best ? *best : targets.unmatched;
}

} // namespace flamebpf::profile
