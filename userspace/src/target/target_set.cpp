#include "target/target_set.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <fmt/format.h>
#include <unordered_set>

#include "common/log.h"
#include "common/procfs.h"
#include "target/cgroup_resolver.h"

namespace flamebpf::target {
namespace {

bool same_target(const Target& a, const Target& b)
{
  return a.pid != 0 ? a.pid == b.pid : a.cgroup_id == b.cgroup_id && b.pid == 0;
}

// A Kubernetes pod selected by its name or UID: every container of it in one target.
bool is_pod(const Target& target)
{
  return target.pid == 0 && target.container_id.empty() && !target.labels.pod.empty();
}

std::string describe(const Target& target)
{
  if (target.pid != 0)
    return fmt::format("process {}", target.pid);
  if (!target.container_id.empty())
    return fmt::format("container {}", target.container_id.substr(0, 12));
  return fmt::format("cgroup {}", target.cgroup_path);
}

} // namespace

TargetSet::TargetSet(TargetOptions options, ContainerDirectory directory, std::string proc_root)
    : options_(std::move(options)), directory_(std::move(directory)),
      proc_root_(std::move(proc_root))
{
}

Result<TargetSet> TargetSet::create(const TargetOptions& options,
                                    ContainerDirectory directory,
                                    const std::string& proc_root)
{
  TargetSet set(options, std::move(directory), proc_root);
  auto add = [&](Target target) {
    for (const auto& existing : set.live_) {
      if (same_target(existing, target)) {
        if (!target.argument.empty())
          spdlog::info("{} is the same target as {}; profiled once", target.argument,
                       existing.name);
        return;
      }
    }
    set.make_names_unique(target);
    spdlog::debug("target {}: {}", target.name, describe(target));
    set.live_.push_back(std::move(target));
  };

  for (uint32_t pid : options.pids) {
    // The kernel filter matches processes (tgids); a thread id stands for its process.
    auto tgid = procfs::read_tgid(pid, proc_root);
    if (!tgid)
      return fail(usage_error(fmt::format("no process with pid {}", pid)));
    if (*tgid != pid)
      spdlog::info("pid {} is a thread of process {}; profiling the process", pid, *tgid);
    Target target;
    target.argument = std::to_string(pid);
    target.pid = *tgid;
    target.name = procfs::read_comm(*tgid, proc_root).value_or("pid") + "-" + std::to_string(*tgid);
    add(std::move(target));
  }
  if (!options.cgroups.empty() || options.all_containers)
    set.directory_.refresh();
  for (const auto& argument : options.cgroups) {
    auto target = resolve_target(argument, set.directory_);
    if (!target)
      return fail(target.error());
    add(std::move(*target));
  }
  if (options.all_containers) {
    size_t containers = 0;
    for (const auto& container : set.directory_.inventory().containers) {
      if (set.directory_.is_pod_sandbox(container.id))
        continue;
      add(set.directory_.container_target(container));
      ++containers;
    }
    spdlog::info("profiling {} containers{}", containers,
                 options.containers_only ? "" : " and the host");
    if (set.directory_.inventory().truncated)
      spdlog::warn("the cgroup tree has more directories than flamebpf scans; some containers "
                   "may be missed");
  }
  for (const auto& below : set.directory_.inventory().directories)
    set.watched_.push_back(set.directory_.cgroup2_mount() + below);
  set.find_pod_containers();
  return set;
}

bool TargetSet::has_pod_target() const
{
  return std::any_of(live_.begin(), live_.end(), is_pod);
}

void TargetSet::find_pod_containers()
{
  pod_containers_.clear();
  const std::string& mount = directory_.cgroup2_mount();
  for (const auto& target : live_) {
    if (!is_pod(target) || !target.cgroup_path.starts_with(mount))
      continue;
    std::string pod_path = target.cgroup_path.substr(mount.size()) + "/";
    for (const auto& container : directory_.inventory().containers) {
      if (container.path.starts_with(pod_path) && !directory_.is_pod_sandbox(container.id))
        pod_containers_.emplace_back(container.path, directory_.container_labels(container.id));
    }
  }
}

bool TargetSet::keeps_unmatched() const
{
  if (options_.all_containers)
    return !options_.containers_only;
  return requested() == 0;
}

bool TargetSet::per_target_output() const
{
  return options_.all_containers || requested() > 1;
}

bool TargetSet::follows_changes() const
{
  // A pod's containers come and go (a restart is a new container): each is found for its labels.
  return options_.all_containers || !waiting_.empty() || has_pod_target();
}

const std::vector<std::string>& TargetSet::watched_directories() const
{
  return watched_;
}

bool TargetSet::is_live(const Target& target) const
{
  if (target.pid != 0) {
    auto status =
        procfs::read_file(proc_root_ + "/" + std::to_string(target.pid) + "/status", 1 << 16);
    // Only the kernel saying so means the process is gone: running out of descriptors or memory
    // (EMFILE, ENOMEM) is flamebpf's own trouble, and must not drop a live target.
    if (!status)
      return status.error().errno_value != ENOENT && status.error().errno_value != ESRCH;
    auto tgid = procfs::status_field(*status, "Tgid");
    return tgid && *tgid != 0;
  }
  auto id = cgroup_id_of(target.cgroup_path);
  return id && *id == target.cgroup_id;
}

void TargetSet::make_names_unique(Target& target) const
{
  auto taken = [&](const std::string& name) {
    if (keeps_unmatched() && name == "host")
      return true;
    return std::any_of(live_.begin(), live_.end(), [&](const Target& other) {
      return other.name == name && !same_target(other, target);
    });
  };
  if (!taken(target.name))
    return;
  std::string suffix = !target.container_id.empty() ? target.container_id.substr(0, 12)
                       : target.pid != 0            ? std::to_string(target.pid)
                                                    : std::to_string(target.cgroup_id);
  target.name += "-" + suffix;
}

void TargetSet::retire(Target target)
{
  retired_.push_back(std::move(target));
}

void TargetSet::forget_dropped(size_t mark)
{
  size_t count = std::min(mark - std::min(mark, forgotten_), retired_.size());
  retired_.erase(retired_.begin(), retired_.begin() + static_cast<std::ptrdiff_t>(count));
  forgotten_ += count;
}

TargetChanges TargetSet::refresh(bool reresolve)
{
  TargetChanges changes;
  for (auto it = live_.begin(); it != live_.end();) {
    if (is_live(*it)) {
      ++it;
      continue;
    }
    Target gone = std::move(*it);
    it = live_.erase(it);
    bool follow = !gone.argument.empty() && gone.pid == 0;
    if (gone.pid != 0)
      spdlog::info("target {}: process {} exited; dropped", gone.name, gone.pid);
    else if (follow)
      spdlog::info("target {}: {} stopped; waiting for it to start again", gone.name,
                   describe(gone));
    else
      spdlog::info("target {}: {} stopped; dropped", gone.name, describe(gone));
    changes.removed.push_back(gone);
    if (follow)
      waiting_.push_back(gone);
    retire(std::move(gone));
  }
  if (!follows_changes() && !reresolve)
    return changes;

  directory_.refresh(reresolve);
  if (reresolve) {
    for (auto it = live_.begin(); it != live_.end();) {
      if (it->argument.empty() || it->pid != 0) {
        ++it;
        continue;
      }
      auto found = resolve_target(it->argument, directory_);
      if (!found || found->cgroup_id == it->cgroup_id) {
        ++it;
        continue;
      }
      found->name = it->name;
      spdlog::info("target {}: now {}", found->name, describe(*found));
      changes.removed.push_back(*it);
      retire(std::move(*it));
      it = live_.erase(it);
      changes.added.push_back(*found);
      live_.push_back(std::move(*found));
    }
  }
  const auto& inventory = directory_.inventory();
  std::unordered_set<uint64_t> live_ids;
  for (const auto& target : live_)
    live_ids.insert(target.cgroup_id);
  bool unknown_names = !waiting_.empty();
  for (const auto& container : inventory.containers) {
    if (options_.all_containers && !live_ids.contains(container.cgroup_id) &&
        !directory_.names().name_of(container.id))
      unknown_names = true;
  }
  if (unknown_names)
    directory_.names().refresh();

  auto add = [&](Target target) {
    make_names_unique(target);
    live_ids.insert(target.cgroup_id);
    changes.added.push_back(target);
    live_.push_back(std::move(target));
  };
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    auto found = resolve_target(it->argument, directory_);
    if (!found || live_ids.contains(found->cgroup_id)) {
      ++it;
      continue;
    }
    found->name = it->name; // the same target to the user, whatever its new ID
    spdlog::info("target {}: started again as {}", found->name, describe(*found));
    add(std::move(*found));
    it = waiting_.erase(it);
  }
  if (options_.all_containers) {
    for (const auto& container : inventory.containers) {
      if (live_ids.contains(container.cgroup_id) || directory_.is_pod_sandbox(container.id))
        continue;
      Target target = directory_.container_target(container);
      spdlog::info("target {}: {} started", target.name, describe(target));
      add(std::move(target));
    }
  }
  watched_.clear();
  for (const auto& directory : inventory.directories)
    watched_.push_back(directory_.cgroup2_mount() + directory);
  find_pod_containers();
  return changes;
}

std::map<std::string, profile::TargetLabels> TargetSet::pod_container_labels() const
{
  std::map<std::string, profile::TargetLabels> labels;
  for (const auto& [path, container] : pod_containers_)
    labels.insert_or_assign(container.container_id, container);
  return labels;
}

std::map<std::string, profile::TargetLabels> TargetSet::labels() const
{
  std::map<std::string, profile::TargetLabels> labels;
  for (const auto* list : {&retired_, &live_}) {
    for (const auto& target : *list) {
      if (target.labels != profile::TargetLabels{})
        labels.insert_or_assign(target.name, target.labels);
    }
  }
  return labels;
}

profile::TargetNames TargetSet::names() const
{
  profile::TargetNames names;
  for (const auto* list : {&retired_, &live_}) {
    for (const auto& target : *list) {
      if (target.pid != 0) {
        names.by_pid[target.pid] = target.name;
      } else {
        names.by_cgroup[target.cgroup_id] = target.name;
        const std::string& mount = directory_.cgroup2_mount();
        if (target.cgroup_path.starts_with(mount) && target.cgroup_path.size() > mount.size())
          names.by_cgroup_path.emplace_back(target.cgroup_path.substr(mount.size()), target.name);
      }
    }
  }
  for (const auto& [path, labels] : pod_containers_)
    names.pod_containers_by_cgroup_path.emplace_back(path, labels.container_id);
  return names;
}

} // namespace flamebpf::target
