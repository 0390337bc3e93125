#include "common/contained_file.h"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace flamebpf {
namespace {

std::string joined(const std::string& root, const std::string& path)
{
  return root + (path.starts_with('/') ? "" : "/") + path;
}

} // namespace

Result<UniqueFd> open_resolved(int dir_fd,
                               const std::string& path,
                               uint64_t flags,
                               uint64_t resolve,
                               const std::string& shown,
                               mode_t mode)
{
  open_how how{};
  how.flags = flags | O_CLOEXEC;
  how.mode = (flags & O_CREAT) ? mode : 0; // openat2 refuses a mode without O_CREAT
  how.resolve = resolve;
  int fd = static_cast<int>(::syscall(SYS_openat2, dir_fd, path.c_str(), &how, sizeof how));
  if (fd < 0)
    return fail(system_error(errno, "cannot open " + shown));
  return UniqueFd(fd);
}

Result<std::optional<UniqueFd>>
find_entry(int dir_fd, const std::string& name, const std::string& shown)
{
  auto fd = open_resolved(dir_fd, name, O_PATH | O_NOFOLLOW, kResolveBeneathNoLinks, shown);
  if (!fd) {
    if (fd.error().errno_value == ENOENT)
      return std::optional<UniqueFd>();
    return fail(fd.error());
  }
  return std::optional<UniqueFd>(std::move(*fd));
}

Result<UniqueFd> open_directory(const std::string& path)
{
  UniqueFd fd(::open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid())
    return fail(system_error(errno, "cannot open " + path));
  return fd;
}

Result<UniqueFd>
open_directory_at(int dir_fd, const std::string& path, uint64_t resolve, const std::string& shown)
{
  return open_resolved(dir_fd, path, O_PATH | O_DIRECTORY, resolve, shown);
}

Result<UniqueFd> open_directory_in_root(const std::string& root, const std::string& path)
{
  auto root_fd = open_directory(root);
  if (!root_fd)
    return fail(root_fd.error());
  return open_directory_at(root_fd->get(), path, kResolveInRoot, joined(root, path));
}

Result<UniqueFd> reopen_regular(int path_fd, const std::string& shown)
{
  struct stat status {};
  if (::fstat(path_fd, &status) != 0)
    return fail(system_error(errno, "cannot stat " + shown));
  if (!S_ISREG(status.st_mode))
    return fail(Error{EINVAL, "cannot read " + shown + ": not a regular file"});
  // The descriptor's own magic link names this very inode, whatever happens to the path now.
  std::string self = "/proc/self/fd/" + std::to_string(path_fd);
  UniqueFd file(::open(self.c_str(), O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC));
  if (!file.valid())
    return fail(system_error(errno, "cannot open " + shown));
  return file;
}

Result<UniqueFd>
open_regular_at(int dir_fd, const std::string& path, uint64_t resolve, const std::string& shown)
{
  auto located = open_resolved(dir_fd, path, O_PATH, resolve, shown);
  if (!located)
    return fail(located.error());
  return reopen_regular(located->get(), shown);
}

Result<UniqueFd> open_contained(const std::string& root, const std::string& path)
{
  auto root_fd = open_directory(root);
  if (!root_fd)
    return fail(root_fd.error());
  return open_regular_at(root_fd->get(), path, kResolveInRoot, joined(root, path));
}

Result<std::string>
read_bounded(int fd, size_t max_bytes, bool error_if_larger, const std::string& shown)
{
  std::string content;
  char buffer[16384];
  // One byte past the cap tells a file that is too large from one that fits exactly.
  size_t limit = error_if_larger ? max_bytes + 1 : max_bytes;
  while (content.size() < limit) {
    ssize_t n = ::pread(fd, buffer, std::min(sizeof buffer, limit - content.size()),
                        static_cast<off_t>(content.size()));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return fail(system_error(errno, "cannot read " + shown));
    if (n == 0)
      break;
    content.append(buffer, static_cast<size_t>(n));
  }
  if (content.size() > max_bytes)
    return fail(Error{EFBIG, "cannot read " + shown + ": larger than " + std::to_string(max_bytes) +
                                 " bytes"});
  return content;
}

Result<std::string> read_contained(const std::string& root,
                                   const std::string& path,
                                   size_t max_bytes,
                                   bool error_if_larger)
{
  auto file = open_contained(root, path);
  if (!file)
    return fail(file.error());
  return read_bounded(file->get(), max_bytes, error_if_larger, joined(root, path));
}

} // namespace flamebpf
