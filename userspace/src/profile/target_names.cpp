#include "profile/target_names.h"

namespace flamebpf::profile {

namespace {

// The value of the deepest path in paths that is process_path or one of its ancestors.
const std::string* deepest_containing(const std::vector<std::pair<std::string, std::string>>& paths,
                                      std::string_view process_path)
{
  const std::string* best = nullptr;
  size_t best_length = 0;
  for (const auto& [path, value] : paths) {
    bool inside = process_path == path ||
                  (process_path.starts_with(path) && process_path[path.size()] == '/');
    if (inside && path.size() > best_length) {
      best = &value;
      best_length = path.size();
    }
  }
  return best;
}

} // namespace

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
  const std::string* best = deepest_containing(targets.by_cgroup_path, process_cgroup.path);
  return best ? *best : targets.unmatched;
}

const std::string& pod_container_of(const TargetNames& targets, std::string_view process_path)
{
  static const std::string none;
  const std::string* id = deepest_containing(targets.pod_containers_by_cgroup_path, process_path);
  return id ? *id : none;
}

} // namespace flamebpf::profile
