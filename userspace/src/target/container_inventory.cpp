#include "target/container_inventory.h"

#include <dirent.h>
#include <fcntl.h>

#include "common/unique_fd.h"
#include "target/cgroup_resolver.h"

namespace flamebpf::target {
namespace {

uint32_t depth_of(const std::string& below_mount)
{
  uint32_t depth = 0;
  for (char c : below_mount)
    depth += c == '/';
  return below_mount == "/" ? 0 : depth;
}

// Names of the subdirectories of the directory open as fd (taken).
std::vector<std::string> subdirectories(UniqueFd fd)
{
  std::vector<std::string> names;
  DIR* dir = ::fdopendir(fd.get());
  if (!dir)
    return names;
  fd.release();
  while (dirent* entry = ::readdir(dir)) {
    std::string_view name = entry->d_name;
    if (entry->d_type == DT_DIR && name != "." && name != "..")
      names.emplace_back(name);
  }
  ::closedir(dir);
  return names;
}

} // namespace

CgroupInventory scan_cgroup_tree(const std::string& cgroup2_mount, size_t max_directories)
{
  CgroupInventory inventory;
  std::vector<std::string> pending{"/"};
  while (!pending.empty()) {
    if (inventory.directories.size() >= max_directories) {
      inventory.truncated = true;
      break;
    }
    std::string below = std::move(pending.back());
    pending.pop_back();
    std::string absolute = below == "/" ? cgroup2_mount : cgroup2_mount + below;
    UniqueFd fd(::open(absolute.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.valid())
      continue; // removed since its parent was read
    inventory.directories.push_back(below);
    for (auto& name : subdirectories(std::move(fd))) {
      std::string child = below == "/" ? "/" + name : below + "/" + name;
      auto id = [&]() -> uint64_t {
        auto found = cgroup_id_of(cgroup2_mount + child);
        return found ? *found : 0;
      };
      if (auto match = container_of_cgroup(child); match && match->cgroup == child) {
        // A container's own sub-cgroups count for it: no need to look inside.
        if (uint64_t cgroup_id = id())
          inventory.containers.push_back(
              {match->id, match->runtime, match->pod_uid, child, cgroup_id, depth_of(child)});
        continue;
      }
      if (auto uid = pod_of_component(name)) {
        if (uint64_t cgroup_id = id())
          inventory.pods.push_back({*uid, child, cgroup_id, depth_of(child)});
      }
      pending.push_back(std::move(child));
    }
  }
  return inventory;
}

} // namespace flamebpf::target
