#include "target/cgroup_resolver.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>

namespace flamebpf::target {
// The cgroup id is what name_to_handle_at returns for a cgroup2 directory (as bpftrace's
// cgroupid() does); on 64-bit kernels it equals the inode number, the fallback.
Result<uint64_t> cgroup_id_of(const std::string& path)
{
  struct {
    file_handle handle;
    uint64_t id;
  } buffer{};
  buffer.handle.handle_bytes = sizeof(uint64_t);
  int mount_id = 0;
  if (name_to_handle_at(AT_FDCWD, path.c_str(), &buffer.handle, &mount_id, 0) == 0 &&
      buffer.handle.handle_bytes == sizeof(uint64_t)) {
    uint64_t id = 0;
    std::memcpy(&id, buffer.handle.f_handle, sizeof id);
    return id;
  }
  struct stat status {};
  if (stat(path.c_str(), &status) != 0)
    return fail(system_error(errno, "cannot stat cgroup " + path));
  return static_cast<uint64_t>(status.st_ino);
}

std::string relative_to_mount(const std::string& path, const std::string& mount)
{
  auto normal_path = std::filesystem::path(path).lexically_normal().string();
  auto normal_mount = std::filesystem::path(mount).lexically_normal().string();
  while (normal_path.size() > 1 && normal_path.back() == '/')
    normal_path.pop_back();
  while (normal_mount.size() > 1 && normal_mount.back() == '/')
    normal_mount.pop_back();
  if (normal_path == normal_mount)
    return "/";
  std::string prefix = normal_mount == "/" ? "/" : normal_mount + "/";
  if (normal_path.rfind(prefix, 0) != 0)
    return "";
  // Built with append: gcc 12 at -O3 warns falsely (-Wrestrict) about "/" + std::string.
  std::string below(1, '/');
  below.append(normal_path, prefix.size());
  return below;
}

Result<CgroupTarget> resolve_cgroup(const std::string& argument, const std::string& cgroup2_mount)
{
  if (argument.empty())
    return fail(error("empty --cgroup argument"));
  std::string path = argument.front() == '/' ? argument : cgroup2_mount + "/" + argument;
  std::string below = relative_to_mount(path, cgroup2_mount);
  if (below.empty())
    return fail(error("cgroup " + argument + " is not under the cgroup2 mount " + cgroup2_mount +
                      "; give a path below it or relative to it"));
  path = std::filesystem::path(cgroup2_mount + below).lexically_normal().string();
  while (path.size() > 1 && path.back() == '/')
    path.pop_back();

  struct statfs filesystem {};
  if (statfs(path.c_str(), &filesystem) != 0) {
    auto failure = system_error(errno, "unknown cgroup " + argument + " (" + path + ")");
    failure.message += "; list the cgroups with: ls " + cgroup2_mount;
    return fail(failure);
  }
  struct stat status {};
  if (filesystem.f_type != CGROUP2_SUPER_MAGIC || stat(path.c_str(), &status) != 0 ||
      !S_ISDIR(status.st_mode))
    return fail(error("cgroup " + argument + " (" + path + ") is not a cgroup2 directory"));

  auto id = cgroup_id_of(path);
  if (!id)
    return fail(id.error());
  CgroupTarget target;
  target.path = path;
  target.cgroup_id = *id;
  target.name = below == "/" ? "root" : below.substr(1);
  for (char c : below)
    target.level += c == '/';
  if (below == "/")
    target.level = 0;
  return target;
}

} // namespace flamebpf::target
