#include "common/atomic_file.h"

#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <sstream>
#include <unistd.h>

#include "common/unique_fd.h"

namespace flamebpf {

Result<> write_file_atomically(const std::string& path,
                               const std::function<Result<>(std::ostream&)>& write_content)
{
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
  const std::string& bytes = content.str();
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return discard(system_error(n < 0 ? errno : EIO, "cannot write " + temporary));
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0)
    return discard(system_error(errno, "cannot write " + temporary));
  fd.reset();
  if (::rename(temporary.c_str(), path.c_str()) != 0)
    return discard(system_error(errno, "cannot rename " + temporary + " to " + path));
  return {};
}

} // namespace flamebpf
