#include "jvm/agent_installer.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/capabilities.h"
#include "common/contained_file.h"

namespace flamebpf::jvm {
namespace {

std::atomic<unsigned> g_temporary_counter{0};

// Opens a name directly inside dir_fd: no symlink is followed at all, not even inside the root.
Result<UniqueFd> open_beneath(int dir_fd, const std::string& name, uint64_t flags, mode_t mode)
{
  open_how how{};
  how.flags = flags;
  how.mode = (flags & O_CREAT) ? mode : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  int fd = static_cast<int>(::syscall(SYS_openat2, dir_fd, name.c_str(), &how, sizeof how));
  if (fd < 0)
    return fail(system_error(errno, "cannot open " + name));
  return UniqueFd(fd);
}

// Empty if the open file holds exactly library and only its owner (the JVM's user or root) can
// change it; otherwise why it cannot be reused.
std::string
reuse_problem(int fd, std::span<const unsigned char> library, const AttachTarget& target)
{
  struct stat status {};
  if (::fstat(fd, &status) != 0)
    return std::string("cannot stat it: ") + std::strerror(errno);
  if (!S_ISREG(status.st_mode))
    return "it is not a regular file";
  if (status.st_uid != target.uid && status.st_uid != 0)
    return "it belongs to uid " + std::to_string(status.st_uid);
  if ((status.st_mode & 022) != 0)
    return "users other than its owner may write it";
  if (static_cast<uint64_t>(status.st_size) != library.size())
    return "a different file of that name exists";
  unsigned char buffer[65536];
  size_t offset = 0;
  while (offset < library.size()) {
    ssize_t n = ::read(fd, buffer, std::min(sizeof buffer, library.size() - offset));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return std::string("cannot read it: ") + std::strerror(errno);
    if (n == 0 || !std::equal(buffer, buffer + n, library.begin() + static_cast<ptrdiff_t>(offset)))
      return "a different file of that name exists";
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

// Writes a temporary file and renames it to name, never replacing an existing file. EEXIST in
// the result means another writer got there first. Runs as the JVM's uid/gid (see ScopedFsIds):
// the file is the JVM's from the start, and it works where host root is an unmapped user.
Result<> create_library(int dir_fd,
                        const std::string& name,
                        std::span<const unsigned char> library,
                        const AttachTarget& target)
{
  std::string ids = std::to_string(target.uid) + ":" + std::to_string(target.gid);
  ScopedFsIds as_jvm(target.uid, target.gid);
  if (!as_jvm.active())
    return fail(error("cannot act as uid:gid " + ids + caps::setid_hint()));
  std::string temporary = "." + name + ".tmp-" + std::to_string(::getpid()) + "-" +
                          std::to_string(g_temporary_counter++);
  auto file =
      open_beneath(dir_fd, temporary, O_CREAT | O_EXCL | O_NOFOLLOW | O_WRONLY | O_CLOEXEC, 0600);
  if (!file)
    return fail(file.error());
  auto step = [&]() -> Result<> {
    if (auto written = write_all(file->get(), library); !written)
      return written;
    // A set-group-ID directory hands its own group down; the JVM's user must own the file.
    struct stat status {};
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
  return done;
}

// Installs into one directory; the error is the reason to move on to the next one.
Result<std::string> install_in(const AttachTarget& target,
                               std::span<const unsigned char> library,
                               const std::string& name,
                               std::string_view directory)
{
  std::string path = std::string(directory) + "/" + name;
  auto root_fd = open_root(target);
  if (!root_fd)
    return fail(root_fd.error());
  auto dir_fd = open_directory_at(root_fd->get(), std::string(directory), kResolveInRoot,
                                  target.process_path + "/root" + std::string(directory));
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
  // Twice: a concurrent installer may create the name between our look and our rename.
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto existing = open_beneath(dir_fd->get(), name,
                                 O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0);
    if (existing) {
      std::string problem = reuse_problem(existing->get(), library, target);
      if (problem.empty())
        return path;
      return fail(error(name + ": " + problem));
    }
    int open_errno = existing.error().errno_value;
    if (open_errno == ELOOP)
      return fail(error(name + " is a symlink"));
    if (open_errno == ENXIO)
      return fail(error(name + " is not a regular file"));
    if (open_errno != ENOENT)
      return fail(system_error(open_errno, "cannot open " + name));
    auto created = create_library(dir_fd->get(), name, library, target);
    if (created)
      return path;
    if (created.error().errno_value != EEXIST)
      return fail(error("cannot create " + name + ": " + created.error().message));
  }
  return fail(error(name + " keeps changing"));
}

} // namespace

std::string agent_file_name(std::span<const unsigned char> library)
{
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char byte : library) {
    hash ^= byte;
    hash *= 0x100000001b3ULL;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return std::string("libflamebpf-agent-") + hex + ".so";
}

Result<std::string> install_agent(const AttachTarget& target,
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
  std::string reasons;
  for (std::string_view directory : kAgentDirectories) {
    auto installed = install_in(target, library, name, directory);
    if (installed)
      return installed;
    reasons +=
        (reasons.empty() ? "" : "; ") + std::string(directory) + ": " + installed.error().message;
  }
  // A capability flamebpf lacks is the fix wherever it stopped the install.
  std::string fix =
      reasons.find("flamebpf lacks CAP_") != std::string::npos
          ? "try: grant flamebpf the capability named"
          : "try: give the container a /tmp mounted with exec (e.g. --tmpfs /tmp:exec)";
  return fail(error(what + ": no usable directory (" + reasons + "); " + fix));
}

} // namespace flamebpf::jvm
