#include "target/container_inventory.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

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

struct Subdirectory {
  std::string name;
  // Runtimes' cgroups belong to whoever owns the hierarchy (root); a directory another user owns
  // lies in a subtree delegated to that user, who may name it like a container
  // (docker-<id>.scope) to pose as one.
  bool managers = false;
};

// The subdirectories of the directory open as fd (taken); manager owns the hierarchy.
std::vector<Subdirectory> subdirectories(UniqueFd fd, uid_t manager)
{
  std::vector<Subdirectory> found;
  DIR* dir = ::fdopendir(fd.get());
  if (!dir)
    return found;
  fd.release();
  while (dirent* entry = ::readdir(dir)) {
    std::string_view name = entry->d_name;
    if (entry->d_type != DT_DIR || name == "." || name == "..")
      continue;
    struct stat status {};
    bool managers = ::fstatat(::dirfd(dir), entry->d_name, &status, AT_SYMLINK_NOFOLLOW) == 0 &&
                    status.st_uid == manager;
    found.push_back({std::string(name), managers});
  }
  ::closedir(dir);
  return found;
}

} // namespace

CgroupInventory scan_cgroup_tree(const std::string& cgroup2_mount, size_t max_directories)
{
  CgroupInventory inventory;
  struct stat mount {};
  if (::stat(cgroup2_mount.c_str(), &mount) != 0)
    return inventory;
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
    for (auto& [name, managers] : subdirectories(std::move(fd), mount.st_uid)) {
      std::string child = below == "/" ? "/" + name : below + "/" + name;
      auto id = [&]() -> uint64_t {
        auto found = cgroup_id_of(cgroup2_mount + child);
        return found ? *found : 0;
      };
      auto match = managers ? container_of_cgroup(child) : std::nullopt;
      if (match && match->cgroup == child) {
        // A container's own sub-cgroups count for it: no need to look inside.
        if (uint64_t cgroup_id = id())
          inventory.containers.push_back(
              {match->id, match->runtime, match->pod_uid, child, cgroup_id, depth_of(child)});
        continue;
      }
      auto pod = managers ? pod_of_component(name) : std::nullopt;
      if (pod) {
        if (uint64_t cgroup_id = id())
          inventory.pods.push_back({*pod, child, cgroup_id, depth_of(child)});
      }
      pending.push_back(std::move(child));
    }
  }
  return inventory;
}

} // namespace flamebpf::target
