#include "common/atomic_file.h"

#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include "common/unique_fd.h"

namespace flamebpf {
namespace {

Result<> write_all(int fd, const std::string& bytes, const std::string& path)
{
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return fail(system_error(n < 0 ? errno : EIO, "cannot write " + path));
    done += static_cast<size_t>(n);
  }
  return {};
}

// A device, FIFO or the like (/dev/null, /dev/stdout) cannot be replaced by a rename: it is
// written as it is.
Result<> write_in_place(const std::string& path,
                        const std::function<Result<>(std::ostream&)>& write_content)
{
  std::ostringstream content;
  if (auto written = write_content(content); !written)
    return fail(written.error());
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid())
    return fail(system_error(errno, "cannot open " + path));
  return write_all(fd.get(), content.str(), path);
}

} // namespace

Result<> write_file_atomically(const std::string& path,
                               const std::function<Result<>(std::ostream&)>& write_content)
{
  struct stat existing {};
  if (::stat(path.c_str(), &existing) == 0 && !S_ISREG(existing.st_mode))
    return write_in_place(path, write_content);
  std::string temporary = path + ".tmp." + std::to_string(::getpid());
  UniqueFd fd(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid())
    return fail(system_error(errno, "cannot create " + temporary));
  auto discard = [&](Error failure) {
    ::unlink(temporary.c_str());
    return fail(std::move(failure));
  };
  std::ostringstream content;
  if (auto written = write_content(content); !written)
    return discard(written.error());
  if (auto written = write_all(fd.get(), content.str(), temporary); !written)
    return discard(written.error());
  if (::fsync(fd.get()) != 0)
    return discard(system_error(errno, "cannot write " + temporary));
  fd.reset();
  if (::rename(temporary.c_str(), path.c_str()) != 0)
    return discard(system_error(errno, "cannot rename " + temporary + " to " + path));
  return {};
}

} // namespace flamebpf
