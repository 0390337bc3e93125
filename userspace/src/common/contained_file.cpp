#include "common/contained_file.h"

#include <cerrno>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace flamebpf {

Result<UniqueFd> open_contained(const std::string& root, const std::string& path)
{
  std::string shown = root + (path.starts_with('/') ? "" : "/") + path;
  UniqueFd root_fd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd.valid())
    return fail(system_error(errno, "cannot open " + root));
  open_how how{};
  // O_NONBLOCK: opening a FIFO must not wait for a writer.
  how.flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  int fd = static_cast<int>(::syscall(SYS_openat2, root_fd.get(), path.c_str(), &how, sizeof how));
  if (fd < 0)
    return fail(system_error(errno, "cannot open " + shown));
  UniqueFd file(fd);
  struct stat status {};
  if (::fstat(file.get(), &status) != 0)
    return fail(system_error(errno, "cannot stat " + shown));
  if (!S_ISREG(status.st_mode))
    return fail(error("cannot read " + shown + ": not a regular file"));
  return file;
}

Result<std::string> read_contained(const std::string& root,
                                   const std::string& path,
                                   size_t max_bytes,
                                   bool error_if_larger)
{
  auto file = open_contained(root, path);
  if (!file)
    return fail(file.error());
  std::string content;
  char buffer[16384];
  // One byte past the cap tells a file that is too large from one that fits exactly.
  size_t limit = error_if_larger ? max_bytes + 1 : max_bytes;
  while (content.size() < limit) {
    ssize_t n = ::read(file->get(), buffer, std::min(sizeof buffer, limit - content.size()));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return fail(system_error(errno, "cannot read " + root + "/" + path));
    if (n == 0)
      break;
    content.append(buffer, static_cast<size_t>(n));
  }
  if (content.size() > max_bytes)
    return fail(error("cannot read " + root + "/" + path + ": larger than " +
                      std::to_string(max_bytes) + " bytes"));
  return content;
}

} // namespace flamebpf
