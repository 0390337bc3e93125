#include "target/resolver.h"

#include <algorithm>
#include <fmt/format.h>
#include <sys/stat.h>

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

Target from_pod(const PodCgroup& pod, const std::string& mount, const std::string& argument)
{
  Target target;
  target.argument = argument;
  target.name = "pod-" + pod.uid.substr(0, 8);
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
  std::sort(scored.begin(), scored.end());
  std::string list;
  for (size_t i = 0; i < scored.size() && i < kMaxSuggestions; ++i)
    list += (i ? ", " : "") + scored[i].second;
  if (scored.size() > kMaxSuggestions)
    list += fmt::format(" (and {} more)", scored.size() - kMaxSuggestions);
  return list;
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
}

std::string ContainerDirectory::display_name(const std::string& container_id)
{
  if (auto name = names_.name_of(container_id))
    return *name;
  return container_id.substr(0, kShortId);
}

Target ContainerDirectory::container_target(const ContainerCgroup& container)
{
  Target target;
  target.name = display_name(container.id);
  target.container_id = container.id;
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
      return from_pod(*pods.front(), mount, argument);
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
