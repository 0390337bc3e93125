#include "target/resolver.h"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <set>
#include <sys/stat.h>

#include "common/text.h"
#include "target/cgroup_resolver.h"

namespace flamebpf::target {
namespace {

constexpr size_t kMinIdPrefix = 4;
constexpr size_t kShortId = 12;
constexpr size_t kMaxSuggestions = 5;

bool is_hex_prefix(std::string_view text, bool allow_dashes)
{
  if (text.size() < kMinIdPrefix)
    return false;
  return std::all_of(text.begin(), text.end(), [&](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (allow_dashes && c == '-');
  });
}

Target from_cgroup(const CgroupTarget& cgroup, const std::string& argument)
{
  Target target;
  target.argument = argument;
  target.name = cgroup.name;
  target.cgroup_path = cgroup.path;
  target.cgroup_id = cgroup.cgroup_id;
  target.level = cgroup.level;
  return target;
}

Target from_pod(const PodCgroup& pod, ContainerDirectory& directory, const std::string& argument)
{
  Target target;
  target.argument = argument;
  target.name = "pod-" + pod.uid.substr(0, 8);
  if (auto member = directory.pod_of(pod.uid)) {
    target.name = member->namespace_name + "/" + member->pod;
    target.labels.namespace_name = member->namespace_name;
    target.labels.pod = member->pod;
  }
  const std::string& mount = directory.cgroup2_mount();
  target.cgroup_path = mount + pod.path;
  target.cgroup_id = pod.cgroup_id;
  target.level = pod.level;
  return target;
}

// "a1b2c3d4e5f6 (web)"
std::string describe(ContainerDirectory& directory, const ContainerCgroup& container)
{
  std::string short_id = container.id.substr(0, kShortId);
  auto name = directory.names().name_of(container.id);
  return name ? fmt::format("{} ({})", short_id, *name) : short_id;
}

// Names scored by their distance to what the user gave, the closest first, at most
// kMaxSuggestions of them and a count of the rest.
std::string closest_first(std::vector<std::pair<size_t, std::string>> scored)
{
  std::sort(scored.begin(), scored.end());
  std::string list;
  for (size_t i = 0; i < scored.size() && i < kMaxSuggestions; ++i)
    list += (i ? ", " : "") + scored[i].second;
  if (scored.size() > kMaxSuggestions)
    list += fmt::format(" (and {} more)", scored.size() - kMaxSuggestions);
  return list;
}

// The running containers closest to argument, by name or ID, closest first.
std::string closest_candidates(const std::string& argument, ContainerDirectory& directory)
{
  std::vector<std::pair<size_t, std::string>> scored;
  for (const auto& container : directory.inventory().containers) {
    std::string shown = directory.display_name(container.id);
    std::string short_id = container.id.substr(0, kShortId);
    size_t distance = std::min(edit_distance(argument, shown),
                               edit_distance(argument, short_id.substr(0, argument.size())));
    if (shown.find(argument) != std::string::npos || argument.find(shown) != std::string::npos)
      distance = std::min<size_t>(distance, 1);
    scored.emplace_back(distance, shown);
  }
  return closest_first(std::move(scored));
}

// The pods whose containers are named namespace/pod, by UID.
std::set<std::string>
pods_named(ContainerDirectory& directory, std::string_view namespace_name, std::string_view pod)
{
  std::set<std::string> uids;
  for (const auto& container : directory.inventory().containers) {
    const NamedContainer* named = directory.names().find(container.id);
    if (named && named->pod && named->pod->namespace_name == namespace_name &&
        named->pod->pod == pod && !container.pod_uid.empty())
      uids.insert(container.pod_uid);
  }
  return uids;
}

// The running pods closest to argument ("<namespace>/<pod>"), closest first.
std::string closest_pods(std::string_view argument, ContainerDirectory& directory)
{
  std::set<std::string> pods;
  for (const auto& container : directory.inventory().containers) {
    const NamedContainer* named = directory.names().find(container.id);
    if (named && named->pod && !named->pod->pod.empty())
      pods.insert(named->pod->namespace_name + "/" + named->pod->pod);
  }
  std::vector<std::pair<size_t, std::string>> scored;
  for (const auto& pod : pods)
    scored.emplace_back(edit_distance(argument, pod), pod);
  return closest_first(std::move(scored));
}

// <namespace>/<pod> or <namespace>/<pod>/<container>: nullopt if argument has neither form.
std::optional<Result<Target>> resolve_pod_member(const std::string& argument,
                                                 ContainerDirectory& directory)
{
  auto parts = text::split_fields(argument, "/");
  if (argument.ends_with('/') || argument.find("//") != std::string::npos ||
      (parts.size() != 2 && parts.size() != 3) || !is_dns_label(parts[0]) ||
      !is_dns_subdomain(parts[1]) || (parts.size() == 3 && !is_dns_label(parts[2])))
    return std::nullopt;
  if (parts.size() == 3) {
    for (const auto& container : directory.inventory().containers) {
      const NamedContainer* named = directory.names().find(container.id);
      if (named && named->pod && named->name == argument) {
        Target target = directory.container_target(container);
        target.argument = argument;
        return target;
      }
    }
  } else {
    auto uids = pods_named(directory, parts[0], parts[1]);
    if (uids.size() > 1)
      return fail(usage_error(fmt::format("pod {} is ambiguous: pods {} have that name; give the "
                                          "UID of one",
                                          argument, fmt::join(uids, ", "))));
    if (uids.size() == 1) {
      for (const auto& pod : directory.inventory().pods) {
        if (pod.uid == *uids.begin())
          return from_pod(pod, directory, argument);
      }
    }
  }
  std::string candidates = closest_pods(argument, directory);
  return fail(usage_error(fmt::format(
      "unknown cgroup or {} {}: no cgroup2 directory {}/{} and no such Kubernetes {}; {}",
      parts.size() == 2 ? "pod" : "pod container", argument, directory.cgroup2_mount(), argument,
      parts.size() == 2 ? "pod" : "container",
      candidates.empty() ? "no pod is running" : "running pods: " + candidates)));
}

// A path to a container's own cgroup directory is named after the container, when the directory
// belongs to the hierarchy's owner as every runtime's does (see scan_cgroup_tree).
Target name_path_target(Target target, ContainerDirectory& directory)
{
  std::string below = target.cgroup_path.substr(directory.cgroup2_mount().size());
  auto match = container_of_cgroup(below);
  struct stat status {};
  struct stat mount {};
  bool managers = ::stat(target.cgroup_path.c_str(), &status) == 0 &&
                  ::stat(directory.cgroup2_mount().c_str(), &mount) == 0 &&
                  status.st_uid == mount.st_uid;
  if (match && match->cgroup == below && managers) {
    target.container_id = match->id;
    target.name = directory.display_name(match->id);
    target.labels = directory.container_labels(match->id);
  }
  return target;
}

} // namespace

ContainerDirectory::ContainerDirectory(std::string cgroup2_mount, std::string proc_root)
    : cgroup2_mount_(std::move(cgroup2_mount)), names_(std::move(proc_root))
{
}

void ContainerDirectory::refresh(bool names)
{
  inventory_ = scan_cgroup_tree(cgroup2_mount_);
  if (names)
    names_.refresh();
  measure();
}

void ContainerDirectory::measure_memory(std::shared_ptr<MemoryAccount> account)
{
  memory_ = MemoryCharge(std::move(account), MemoryKind::kContainerNames);
  measure();
}

void ContainerDirectory::measure()
{
  uint64_t bytes = names_.memory_bytes();
  bytes += inventory_.containers.capacity() * sizeof(ContainerCgroup) +
           inventory_.pods.capacity() * sizeof(PodCgroup) +
           inventory_.directories.capacity() * sizeof(std::string);
  for (const auto& container : inventory_.containers)
    bytes += heap_bytes(container.id) + heap_bytes(container.pod_uid) + heap_bytes(container.path);
  for (const auto& pod : inventory_.pods)
    bytes += heap_bytes(pod.uid) + heap_bytes(pod.path);
  for (const auto& directory : inventory_.directories)
    bytes += heap_bytes(directory);
  (void)memory_.set(bytes); // measured: never refused
}

std::string ContainerDirectory::display_name(const std::string& container_id)
{
  if (auto name = names_.name_of(container_id))
    return *name;
  return container_id.substr(0, kShortId);
}

bool ContainerDirectory::is_pod_sandbox(const std::string& container_id)
{
  const NamedContainer* named = names_.find(container_id);
  return named && named->pod && named->pod->sandbox;
}

std::optional<PodMember> ContainerDirectory::pod_of(const std::string& pod_uid)
{
  for (const auto& container : inventory_.containers) {
    if (container.pod_uid != pod_uid)
      continue;
    const NamedContainer* named = names_.find(container.id);
    if (named && named->pod && !named->pod->pod.empty())
      return PodMember{named->pod->namespace_name, named->pod->pod, "", pod_uid, false};
  }
  return std::nullopt;
}

profile::TargetLabels ContainerDirectory::container_labels(const std::string& container_id)
{
  profile::TargetLabels labels;
  labels.container_id = container_id;
  if (const NamedContainer* named = names_.find(container_id)) {
    if (named->pod) {
      labels.container = named->pod->sandbox ? "POD" : named->pod->container;
      labels.namespace_name = named->pod->namespace_name;
      labels.pod = named->pod->pod;
    } else {
      labels.container = named->name;
    }
  }
  return labels;
}

Target ContainerDirectory::container_target(const ContainerCgroup& container)
{
  Target target;
  target.name = display_name(container.id);
  target.container_id = container.id;
  target.labels = container_labels(container.id);
  target.cgroup_path = cgroup2_mount_ + container.path;
  target.cgroup_id = container.cgroup_id;
  target.level = container.level;
  return target;
}

Result<Target> resolve_target(const std::string& argument, ContainerDirectory& directory)
{
  const std::string& mount = directory.cgroup2_mount();
  if (argument.empty())
    return fail(usage_error("empty --cgroup argument"));
  if (argument.front() == '/') {
    auto cgroup = resolve_cgroup(argument, mount);
    if (!cgroup)
      return fail(usage_error(cgroup.error().message));
    return name_path_target(from_cgroup(*cgroup, argument), directory);
  }
  struct stat status {};
  if (::stat((mount + "/" + argument).c_str(), &status) == 0 && S_ISDIR(status.st_mode)) {
    auto cgroup = resolve_cgroup(argument, mount);
    if (!cgroup)
      return fail(usage_error(cgroup.error().message));
    return name_path_target(from_cgroup(*cgroup, argument), directory);
  }
  if (auto member = resolve_pod_member(argument, directory))
    return std::move(*member);
  if (argument.find('/') != std::string::npos)
    return fail(usage_error(fmt::format("unknown cgroup {}: no directory {}/{}; list the cgroups "
                                        "with: ls {}",
                                        argument, mount, argument, mount)));

  const auto& inventory = directory.inventory();
  std::string lowered = argument;
  std::transform(lowered.begin(), lowered.end(), lowered.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (is_hex_prefix(lowered, false)) {
    std::vector<const ContainerCgroup*> matches;
    for (const auto& container : inventory.containers) {
      if (container.id.starts_with(lowered))
        matches.push_back(&container);
    }
    if (matches.size() == 1) {
      Target target = directory.container_target(*matches.front());
      target.argument = argument;
      return target;
    }
    if (matches.size() > 1) {
      std::string list;
      for (size_t i = 0; i < matches.size() && i < kMaxSuggestions; ++i)
        list += (i ? ", " : "") + describe(directory, *matches[i]);
      return fail(usage_error(
          fmt::format("container ID prefix {} is ambiguous: it matches {}{}; give more digits",
                      argument, list, matches.size() > kMaxSuggestions ? " and more" : "")));
    }
  }
  std::string uid = lowered.starts_with("pod") ? lowered.substr(3) : lowered;
  if (is_hex_prefix(uid, true)) {
    std::vector<const PodCgroup*> pods;
    for (const auto& pod : inventory.pods) {
      if (pod.uid.starts_with(uid))
        pods.push_back(&pod);
    }
    if (pods.size() == 1)
      return from_pod(*pods.front(), directory, argument);
    if (pods.size() > 1)
      return fail(usage_error(fmt::format("pod UID prefix {} is ambiguous: it matches {} pods",
                                          argument, pods.size())));
  }

  std::vector<const ContainerCgroup*> named;
  for (const auto& container : inventory.containers) {
    if (directory.names().name_of(container.id) == argument)
      named.push_back(&container);
  }
  if (named.size() == 1) {
    Target target = directory.container_target(*named.front());
    target.argument = argument;
    return target;
  }
  if (named.size() > 1) {
    std::string list;
    for (const auto* container : named)
      list += (list.empty() ? "" : ", ") + container->id.substr(0, kShortId);
    return fail(usage_error(fmt::format(
        "container name {} is ambiguous: several runtimes run one so named ({}); give its ID",
        argument, list)));
  }
  for (const auto& known : directory.names().all()) {
    if (known.name == argument)
      return fail(usage_error(fmt::format("container {} ({}, {}) is not running", argument,
                                          known.id.substr(0, kShortId), known.source)));
  }
  std::string candidates = closest_candidates(argument, directory);
  return fail(usage_error(fmt::format(
      "unknown cgroup or container {}: no cgroup2 directory {}/{}, no container ID or name; {}",
      argument, mount, argument,
      candidates.empty() ? "no container is running" : "running containers: " + candidates)));
}

size_t edit_distance(std::string_view a, std::string_view b)
{
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

} // namespace flamebpf::target
