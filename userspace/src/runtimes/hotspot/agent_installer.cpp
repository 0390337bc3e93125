#include "runtimes/hotspot/agent_installer.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/capabilities.h"
#include "common/contained_file.h"
#include "common/hashing.h"
#include "common/procfs.h"
#include "common/scoped_fs_ids.h"
#include "common/text.h"

namespace flamebpf::hotspot {
namespace {

// 16 hex digits no one can guess: a name others cannot occupy before flamebpf creates it.
std::string random_hex()
{
  uint64_t value = 0;
  if (::getrandom(&value, sizeof value, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof value)) {
    // The kernel's pool is not ready this early after boot: weaker, but still nothing a user of
    // the container could know in advance.
    auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    value = static_cast<uint64_t>(now) * 0x9e3779b97f4a7c15ULL ^
            static_cast<uint64_t>(::getpid()) << 32 ^ reinterpret_cast<uintptr_t>(&value);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(value));
  return hex;
}

// The host uid of the container's root: the uid that 0 maps to in the target's user namespace
// (0 for one in the host's).
uint32_t container_root_uid(const AttachTarget& target)
{
  auto map = read_process_file(target, "uid_map", 1 << 12);
  if (!map)
    return 0;
  // "<first id inside> <first id outside> <count>" per line.
  for (std::string_view line : text::lines(*map)) {
    auto fields = text::split_fields(line);
    if (fields.size() < 3)
      continue;
    auto inside = text::parse_number<uint32_t>(fields[0]);
    auto outside = text::parse_number<uint32_t>(fields[1]);
    auto count = text::parse_number<uint32_t>(fields[2]);
    if (inside == 0u && outside && count && *count > 0)
      return *outside;
  }
  return 0;
}

// Empty if users other than root, the container's root and the JVM's cannot put another file at
// a name in the directory; otherwise why they can.
std::string directory_problem(int dir_fd, const AttachTarget& target)
{
  struct stat status {};
  if (::fstat(dir_fd, &status) != 0)
    return std::string("cannot stat it: ") + std::strerror(errno);
  if (status.st_uid != 0 && status.st_uid != target.uid &&
      status.st_uid != container_root_uid(target))
    return "it belongs to uid " + std::to_string(status.st_uid) + ", who could replace the library";
  if ((status.st_mode & 022) != 0 && (status.st_mode & S_ISVTX) == 0)
    return "other users may write it and it is not sticky, so they could replace the library";
  return "";
}

// Empty if the open file holds exactly library and only its owner (the JVM's user or root) can
// change it; otherwise why it cannot be reused.
std::string
reuse_problem(int fd, std::span<const unsigned char> library, const AttachTarget& target)
{
  struct stat status {};
  if (::fstat(fd, &status) != 0)
    return std::string("cannot stat it: ") + std::strerror(errno);
  std::string holder = "held by uid " + std::to_string(status.st_uid);
  if (status.st_uid != target.uid && status.st_uid != 0)
    return holder + ", neither the JVM's user nor root";
  if ((status.st_mode & 022) != 0)
    return holder + " and writable by other users";
  if (static_cast<uint64_t>(status.st_size) != library.size())
    return holder + ", a different file";
  // At most the library's size is read: the file was checked to be that long.
  unsigned char buffer[65536];
  size_t offset = 0;
  while (offset < library.size()) {
    ssize_t n = ::pread(fd, buffer, std::min(sizeof buffer, library.size() - offset),
                        static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return std::string("cannot read it: ") + std::strerror(errno);
    if (n == 0 || !std::equal(buffer, buffer + n, library.begin() + static_cast<ptrdiff_t>(offset)))
      return holder + ", a different file";
    offset += static_cast<size_t>(n);
  }
  return "";
}

Result<> write_all(int fd, std::span<const unsigned char> data)
{
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return fail(system_error(errno, "cannot write"));
    data = data.subspan(static_cast<size_t>(n));
  }
  return {};
}

// Writes a temporary file and renames it to name, never replacing an existing file; returns the
// new file's st_dev and st_ino. EEXIST in the result means something is at name already. Runs as
// the JVM's uid/gid (see ScopedFsIds): the file is the JVM's from the start, and it works where
// host root is an unmapped user.
Result<std::pair<uint64_t, uint64_t>> create_library(int dir_fd,
                                                     const std::string& name,
                                                     std::span<const unsigned char> library,
                                                     const AttachTarget& target)
{
  std::string ids = std::to_string(target.uid) + ":" + std::to_string(target.gid);
  ScopedFsIds as_jvm(target.uid, target.gid);
  if (!as_jvm.active())
    return fail(error("cannot act as uid:gid " + ids + caps::setid_hint()));
  std::string temporary = "." + name + ".tmp-" + random_hex();
  // No symlink is followed at all, not even inside the root.
  auto file = open_resolved(dir_fd, temporary, O_CREAT | O_EXCL | O_NOFOLLOW | O_WRONLY,
                            kResolveBeneathNoLinks, temporary, 0600);
  if (!file)
    return fail(file.error());
  struct stat status {};
  auto step = [&]() -> Result<> {
    if (auto written = write_all(file->get(), library); !written)
      return written;
    // A set-group-ID directory hands its own group down; the JVM's user must own the file. It
    // is flamebpf's own file, created just now.
    if (::fstat(file->get(), &status) != 0)
      return fail(system_error(errno, "cannot stat"));
    if ((status.st_uid != target.uid || status.st_gid != target.gid) &&
        ::fchown(file->get(), target.uid, target.gid) != 0) {
      Error failure = system_error(errno, "cannot chown to " + ids);
      failure.message += caps::hint(failure.errno_value, caps::kChown);
      return fail(failure);
    }
    if (::fchmod(file->get(), 0644) != 0)
      return fail(system_error(errno, "cannot chmod"));
    if (::fsync(file->get()) != 0)
      return fail(system_error(errno, "cannot fsync"));
    if (::renameat2(dir_fd, temporary.c_str(), dir_fd, name.c_str(), RENAME_NOREPLACE) == 0)
      return {};
    if (errno != EINVAL)
      return fail(system_error(errno, "cannot rename into place"));
    // A filesystem without RENAME_NOREPLACE: link() never replaces either.
    if (::linkat(dir_fd, temporary.c_str(), dir_fd, name.c_str(), 0) != 0)
      return fail(system_error(errno, "cannot link into place"));
    return {};
  };
  auto done = step();
  ::unlinkat(dir_fd, temporary.c_str(), 0);
  if (!done)
    return fail(done.error());
  return std::pair<uint64_t, uint64_t>(status.st_dev, status.st_ino);
}

// Why the usual name cannot be used (empty: it holds this library already), or nullopt if it is
// free. A file is opened only once it is known to be a regular file.
std::optional<std::string> usual_name_state(int dir_fd,
                                            const std::string& name,
                                            std::span<const unsigned char> library,
                                            const AttachTarget& target)
{
  auto existing = open_regular_at(dir_fd, name, kResolveBeneathNoLinks, name);
  if (existing)
    return reuse_problem(existing->get(), library, target);
  int open_errno = existing.error().errno_value;
  if (open_errno == ENOENT)
    return std::nullopt;
  auto located = find_entry(dir_fd, name, name);
  struct stat status {};
  std::string holder = located && *located && ::fstat(located->value().get(), &status) == 0
                           ? "held by uid " + std::to_string(status.st_uid) + ", "
                           : "";
  if (open_errno == ELOOP)
    return holder + "a symlink";
  if (open_errno == EINVAL)
    return holder + "not a regular file";
  return holder + "unreadable: " + existing.error().message;
}

// Installs into one directory; the error is the reason to move on to the next one (ENOTDIR as
// its errno_value if the path is no directory). In an application's mount, only under a fresh
// name, which is removed once loaded: nothing of flamebpf's stays in the application's files.
Result<InstalledAgent> install_in(const AttachTarget& target,
                                  int root_fd,
                                  std::span<const unsigned char> library,
                                  const std::string& name,
                                  std::string_view directory,
                                  bool application_mount)
{
  std::string in_root(directory);
  auto dir_fd =
      open_directory_at(root_fd, in_root, kResolveInRoot, target.process_path + "/root" + in_root);
  if (!dir_fd && dir_fd.error().errno_value == ENOTDIR)
    return fail(Error{ENOTDIR, "not a directory"});
  if (!dir_fd)
    return fail(
        error(dir_fd.error().errno_value == ENOENT ? "does not exist" : dir_fd.error().message));
  struct statvfs mount {};
  if (::fstatvfs(dir_fd->get(), &mount) != 0)
    return fail(system_error(errno, "cannot statvfs"));
  if (mount.f_flag & ST_NOEXEC)
    return fail(error("mounted noexec"));
  if (mount.f_flag & ST_RDONLY)
    return fail(error("mounted read-only"));
  if (std::string problem = directory_problem(dir_fd->get(), target); !problem.empty())
    return fail(error(problem));
  // Twice: a concurrent installer may create the name between our look and our rename.
  std::string taken;
  for (int attempt = 0; attempt < 2 && taken.empty() && !application_mount; ++attempt) {
    auto state = usual_name_state(dir_fd->get(), name, library, target);
    if (state && state->empty())
      return InstalledAgent{in_root + "/" + name, "", false, 0, 0};
    if (state) {
      taken = name + " is " + *state;
      break;
    }
    auto created = create_library(dir_fd->get(), name, library, target);
    if (created)
      return InstalledAgent{in_root + "/" + name, "", false, created->first, created->second};
    if (created.error().errno_value != EEXIST)
      return fail(error("cannot create " + name + ": " + created.error().message));
  }
  if (taken.empty() && !application_mount)
    taken = name + " keeps changing";
  // The name is another's: a fresh one no one could have taken in advance.
  std::string stem = name.ends_with(".so") ? name.substr(0, name.size() - 3) : name;
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::string fresh = stem + "-" + random_hex() + ".so";
    auto created = create_library(dir_fd->get(), fresh, library, target);
    if (created)
      return InstalledAgent{in_root + "/" + fresh, taken, application_mount, created->first,
                            created->second};
    if (created.error().errno_value != EEXIST)
      return fail(error((taken.empty() ? "" : taken + ", and ") + "cannot create " + fresh + ": " +
                        created.error().message));
  }
  return fail(error((taken.empty() ? "" : taken + ", and ") + "fresh names keep being taken"));
}

// File systems that hold no files a library could be written to.
bool pseudo_file_system(std::string_view type)
{
  static constexpr std::string_view kPseudo[] = {
      "proc",        "sysfs",      "cgroup", "cgroup2",  "devpts",     "mqueue",   "debugfs",
      "tracefs",     "securityfs", "bpf",    "fusectl",  "configfs",   "pstore",   "hugetlbfs",
      "binfmt_misc", "autofs",     "nsfs",   "efivarfs", "rpc_pipefs", "selinuxfs"};
  return std::find(std::begin(kPseudo), std::end(kPseudo), type) != std::end(kPseudo);
}

bool below(std::string_view path, std::string_view directory)
{
  return path == directory || (path.starts_with(directory) && path.size() > directory.size() &&
                               path[directory.size()] == '/');
}

} // namespace

std::vector<std::string> agent_mount_candidates(std::string_view mountinfo)
{
  std::vector<std::string> candidates;
  for (const auto& mount : procfs::parse_mountinfo(mountinfo)) {
    const std::string& point = mount.mount_point;
    if (candidates.size() >= kMaxAgentMounts)
      break;
    if (!point.starts_with('/') || point == "/" || pseudo_file_system(mount.fs_type) ||
        below(point, "/proc") || below(point, "/sys") ||
        (below(point, "/dev") && point != "/dev/shm") ||
        std::find(kAgentDirectories.begin(), kAgentDirectories.end(), point) !=
            kAgentDirectories.end() ||
        std::find(candidates.begin(), candidates.end(), point) != candidates.end())
      continue;
    candidates.push_back(point);
  }
  return candidates;
}

std::string agent_file_name(std::span<const unsigned char> library)
{
  uint64_t hash = Fnv1a().add(library).value();
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return std::string("libflamebpf-agent-") + hex + ".so";
}

Result<InstalledAgent> install_agent(const AttachTarget& target,
                                     std::span<const unsigned char> library,
                                     std::string_view file_name)
{
  std::string name(file_name);
  std::string what = "cannot install agent " + name + " for JVM " +
                     std::to_string(target.host_pid) + " under " + target.process_path + "/root";
  if (name.empty() || name.size() > 200 || name == "." || name == ".." ||
      name.find_first_of(std::string_view("/\0", 2)) != std::string::npos)
    return fail(error(what + ": invalid file name"));
  if (library.empty())
    return fail(error(what + ": the library is empty"));
  auto root_fd = open_root(target);
  if (!root_fd)
    return fail(error(what + ": " + root_fd.error().message));
  std::string reasons;
  for (std::string_view directory : kAgentDirectories) {
    auto installed = install_in(target, root_fd->get(), library, name, directory, false);
    if (installed)
      return installed;
    reasons +=
        (reasons.empty() ? "" : "; ") + std::string(directory) + ": " + installed.error().message;
  }
  // The kernel writes mountinfo, but the container names its mount points: they are only ever
  // paths resolved inside its root.
  auto mountinfo = read_process_file(target, "mountinfo", 1 << 20);
  for (const auto& point :
       mountinfo ? agent_mount_candidates(*mountinfo) : std::vector<std::string>{}) {
    auto installed = install_in(target, root_fd->get(), library, name, point, true);
    if (installed)
      return installed;
    // A file mounted over another (/etc/hosts) is not worth a word.
    if (installed.error().errno_value != ENOTDIR)
      reasons += "; " + point + ": " + installed.error().message;
  }
  // A capability flamebpf lacks is the fix wherever it stopped the install.
  std::string fix =
      reasons.find("flamebpf lacks CAP_") != std::string::npos
          ? "try: grant flamebpf the capability named"
          : "try: give the container a /tmp mounted with exec (e.g. --tmpfs /tmp:exec)";
  return fail(error(what + ": no usable directory (" + reasons + "); " + fix));
}

void remove_agent(const AttachTarget& target, const InstalledAgent& installed)
{
  if (installed.usual_name_taken.empty() && !installed.in_application_mount)
    return;
  auto slash = installed.path.rfind('/');
  if (slash == std::string::npos)
    return;
  std::string directory = installed.path.substr(0, slash);
  std::string name = installed.path.substr(slash + 1);
  auto root_fd = open_root(target);
  if (!root_fd)
    return; // the JVM exited: its /tmp is gone with its container, or it is the JVM's to clean
  auto dir_fd = open_directory_at(root_fd->get(), directory, kResolveInRoot, directory);
  if (!dir_fd)
    return;
  ScopedFsIds as_jvm(target.uid, target.gid);
  auto located = find_entry(dir_fd->get(), name, name);
  struct stat status {};
  if (located && *located && ::fstat(located->value().get(), &status) == 0 &&
      status.st_dev == installed.device && status.st_ino == installed.inode)
    ::unlinkat(dir_fd->get(), name.c_str(), 0);
}

} // namespace flamebpf::hotspot
