#include "common/atomic_file.h"

#include <cerrno>
#include <chrono>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <sstream>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/text.h"

namespace flamebpf {
namespace {

constexpr int kTemporaryAttempts = 16;
constexpr std::string_view kTemporaryMark = ".tmp.";
constexpr size_t kTemporaryHexDigits = 16;
// Room in a temporary's name for the final name's start, so that it stays under NAME_MAX.
constexpr size_t kTemporaryNameStart = 200;

Error refused(std::string message)
{
  return Error{kRefusedErrno, std::move(message)};
}

std::string kind_of(mode_t mode)
{
  if (S_ISLNK(mode))
    return "a symbolic link";
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISSOCK(mode))
    return "a socket";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  return "not a regular file";
}

bool is_null_device(const struct stat& status)
{
  return S_ISCHR(status.st_mode) && status.st_rdev == makedev(1, 3);
}

// Unpredictable, so that no one can plant anything at a temporary's name ahead of time (and
// O_EXCL refuses what they plant anyway).
std::string random_hex()
{
  uint64_t value = 0;
  if (::getrandom(&value, sizeof value, GRND_NONBLOCK) != sizeof value) {
    // Only before the kernel's pool is ready, at boot: the name is then merely unlikely.
    static uint64_t counter = 0;
    auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    value = static_cast<uint64_t>(now) * 0x9E3779B97F4A7C15ull ^ (++counter << 32) ^
            static_cast<uint64_t>(::getpid());
  }
  return fmt::format("{:016x}", value);
}

std::string temporary_name(const std::string& name)
{
  return "." + name.substr(0, kTemporaryNameStart) + std::string(kTemporaryMark) + random_hex();
}

Result<> write_all(int fd, std::string_view bytes, const std::string& shown)
{
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return fail(system_error(n < 0 ? errno : EIO, "cannot write " + shown));
    done += static_cast<size_t>(n);
  }
  return {};
}

Result<std::string> content_of(const ContentWriter& write_content)
{
  std::ostringstream content;
  if (auto written = write_content(content); !written)
    return fail(written.error());
  return std::move(content).str();
}

// The owner and mode checks of a directory flamebpf keeps its files in. with_fix adds how to
// fix it, for a directory the user gave.
Result<> check_private(int fd, const std::string& shown, bool with_fix)
{
  struct stat status {};
  if (::fstat(fd, &status) != 0)
    return fail(system_error(errno, "cannot inspect " + shown));
  if (!S_ISDIR(status.st_mode))
    return fail(refused(shown + " is " + kind_of(status.st_mode) + ", not a directory"));
  uid_t self = ::geteuid();
  std::string owner = self == 0 ? "root" : fmt::format("uid {} (flamebpf's user)", self);
  if (status.st_uid != 0 && status.st_uid != self) {
    std::string message = fmt::format("{} belongs to uid {}, not to {}: its owner could redirect "
                                      "or read the profiles",
                                      shown, status.st_uid, owner);
    if (with_fix)
      message += fmt::format("; give a directory {} owns that no one else can write (flamebpf "
                             "creates a missing one), or chown {} {}",
                             owner, self, shown);
    return fail(refused(message));
  }
  if ((status.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    std::string message =
        fmt::format("{} is writable by others (mode {:04o}): they could replace the profiles",
                    shown, status.st_mode & 07777);
    if (with_fix)
      message += fmt::format("; chmod go-w {}, or give another directory", shown);
    return fail(refused(message));
  }
  return {};
}

// Why opening a directory with O_NOFOLLOW failed, as one line; with_fix as above.
Error directory_error(
    int error, int dir_fd, const std::string& name, const std::string& shown, bool with_fix)
{
  struct stat status {};
  if ((error == ELOOP || error == ENOTDIR) &&
      ::fstatat(dir_fd, name.c_str(), &status, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISLNK(status.st_mode))
      return refused(shown + " is a symbolic link, not a directory of flamebpf's own" +
                     (with_fix ? "; give the directory it leads to" : ""));
    return refused(shown + " is " + kind_of(status.st_mode) + ", not a directory");
  }
  return system_error(error, "cannot open " + shown);
}

// A new file for name's content: O_TMPFILE (nameless until linked), else a new file under an
// unpredictable name. name_out is empty for the former.
Result<UniqueFd> create_temporary(int dir_fd,
                                  const std::string& name,
                                  mode_t mode,
                                  const std::string& shown,
                                  std::string& name_out)
{
  UniqueFd fd(::openat(dir_fd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, mode));
  if (fd.valid()) {
    name_out.clear();
    return fd;
  }
  // EOPNOTSUPP: a filesystem without O_TMPFILE (EISDIR on kernels that predate it).
  if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
    return fail(system_error(errno, "cannot create a file beside " + shown));
  for (int attempt = 0; attempt < kTemporaryAttempts; ++attempt) {
    name_out = temporary_name(name);
    fd.reset(::openat(dir_fd, name_out.c_str(),
                      O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, mode));
    if (fd.valid())
      return fd;
    if (errno != EEXIST)
      break;
  }
  int saved = errno;
  name_out.clear();
  return fail(system_error(saved, "cannot create a file beside " + shown));
}

// Gives the nameless file fd an unpredictable temporary name in dir_fd.
Result<std::string>
link_temporary(int fd, int dir_fd, const std::string& name, const std::string& shown)
{
  std::string self = "/proc/self/fd/" + std::to_string(fd);
  for (int attempt = 0; attempt < kTemporaryAttempts; ++attempt) {
    std::string temporary = temporary_name(name);
    if (::linkat(AT_FDCWD, self.c_str(), dir_fd, temporary.c_str(), AT_SYMLINK_FOLLOW) == 0)
      return temporary;
    if (errno != EEXIST)
      break;
  }
  return fail(system_error(errno, "cannot create a file beside " + shown));
}

Result<> write_bytes_at(int dir_fd,
                        const std::string& name,
                        const FileAccess& access,
                        std::string_view bytes,
                        const std::string& shown)
{
  std::string temporary;
  auto created = create_temporary(dir_fd, name, access.mode, shown, temporary);
  if (!created)
    return fail(created.error());
  UniqueFd fd = std::move(*created);
  auto discard = [&](Error failure) {
    if (!temporary.empty())
      ::unlinkat(dir_fd, temporary.c_str(), 0);
    return fail(std::move(failure));
  };
  if (auto written = write_all(fd.get(), bytes, shown); !written)
    return discard(written.error());
  if (::fsync(fd.get()) != 0)
    return discard(system_error(errno, "cannot write " + shown));
  // Only this file, which flamebpf has just created, is ever given away.
  if (access.owner_uid && ::fchown(fd.get(), *access.owner_uid, access.owner_gid) != 0)
    return discard(system_error(errno, fmt::format("cannot give {} to uid {}", shown,
                                                   static_cast<uint64_t>(*access.owner_uid))));
  if (temporary.empty()) {
    auto linked = link_temporary(fd.get(), dir_fd, name, shown);
    if (!linked)
      return fail(linked.error());
    temporary = *linked;
  }
  fd.reset();
  if (::renameat(dir_fd, temporary.c_str(), dir_fd, name.c_str()) != 0)
    return discard(system_error(errno, "cannot replace " + shown));
  return {};
}

// The descriptor a path names that stands for one of flamebpf's own: /dev/stdout, /dev/fd/3.
std::optional<int> own_descriptor(std::string_view path)
{
  if (path == "/dev/stdout")
    return 1;
  if (path == "/dev/stderr")
    return 2;
  for (std::string_view prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    if (!path.starts_with(prefix))
      continue;
    auto fd = text::parse_number<int>(path.substr(prefix.size()));
    if (fd && *fd >= 0)
      return fd;
  }
  return std::nullopt;
}

struct OutputPlace {
  UniqueFd directory;
  std::string name;
  bool null_device = false;
};

// The directory of an output path and its name there, after refusing what must not be written.
Result<OutputPlace> place_of(const std::string& path)
{
  std::filesystem::path full(path);
  std::string name = full.filename();
  if (name.empty() || name == "." || name == "..")
    return fail(system_error(EISDIR, "cannot write " + path));
  std::string parent = full.has_parent_path() ? full.parent_path().string() : ".";
  // The directory is the user's choice and is followed as given (/var/run leads to /run); from
  // here on nothing is.
  OutputPlace place;
  place.name = name;
  place.directory.reset(::open(parent.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!place.directory.valid())
    return fail(system_error(errno, "cannot write " + path + ": directory " + parent));
  struct stat status {};
  if (::fstatat(place.directory.get(), name.c_str(), &status, AT_SYMLINK_NOFOLLOW) != 0)
    return place;
  if (S_ISDIR(status.st_mode))
    return fail(system_error(EISDIR, "cannot write " + path));
  if (is_null_device(status)) {
    place.null_device = true;
    return place;
  }
  if (!S_ISREG(status.st_mode) && !S_ISLNK(status.st_mode))
    return fail(refused("refusing to write " + path + ": it is " + kind_of(status.st_mode) +
                        ", not a regular file; flamebpf writes profiles to regular files, or to "
                        "stdout with -o -"));
  return place;
}

} // namespace

Result<UniqueFd> open_private_directory(const std::string& path, bool create)
{
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid() && errno == ENOENT && create) {
    std::filesystem::path full(path);
    std::error_code failed;
    if (full.has_parent_path())
      std::filesystem::create_directories(full.parent_path(), failed);
    if (failed)
      return fail(system_error(failed.value(), "cannot create " + full.parent_path().string()));
    if (::mkdir(path.c_str(), 0750) != 0 && errno != EEXIST)
      return fail(system_error(errno, "cannot create " + path));
    fd.reset(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  }
  if (!fd.valid())
    return fail(directory_error(errno, AT_FDCWD, path, path, true));
  if (auto checked = check_private(fd.get(), path, true); !checked)
    return fail(checked.error());
  return fd;
}

Result<UniqueFd> open_private_subdirectory(int dir_fd,
                                           const std::string& name,
                                           bool create,
                                           const std::string& shown)
{
  if (create && ::mkdirat(dir_fd, name.c_str(), 0750) != 0 && errno != EEXIST)
    return fail(system_error(errno, "cannot create " + shown));
  UniqueFd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid())
    return fail(directory_error(errno, dir_fd, name, shown, false));
  if (auto checked = check_private(fd.get(), shown, false); !checked)
    return fail(checked.error());
  return fd;
}

Result<> write_file_at(int dir_fd,
                       const std::string& name,
                       const FileAccess& access,
                       const ContentWriter& write_content,
                       const std::string& shown)
{
  auto content = content_of(write_content);
  if (!content)
    return fail(content.error());
  return write_bytes_at(dir_fd, name, access, *content, shown);
}

Result<> replace_symlink_at(int dir_fd,
                            const std::string& name,
                            const std::string& target,
                            const std::string& shown)
{
  for (int attempt = 0; attempt < kTemporaryAttempts; ++attempt) {
    std::string temporary = temporary_name(name);
    if (::symlinkat(target.c_str(), dir_fd, temporary.c_str()) != 0) {
      if (errno == EEXIST)
        continue;
      return fail(system_error(errno, "cannot link " + shown));
    }
    if (::renameat(dir_fd, temporary.c_str(), dir_fd, name.c_str()) != 0) {
      int saved = errno;
      ::unlinkat(dir_fd, temporary.c_str(), 0);
      return fail(system_error(saved, "cannot link " + shown));
    }
    return {};
  }
  return fail(system_error(EEXIST, "cannot link " + shown));
}

Result<> append_at(int dir_fd,
                   const std::string& name,
                   std::string_view bytes,
                   mode_t mode,
                   const std::string& shown)
{
  constexpr int kAppend = O_WRONLY | O_APPEND | O_NOCTTY | O_NONBLOCK | O_CLOEXEC;
  UniqueFd fd(::openat(dir_fd, name.c_str(), kAppend | O_CREAT | O_EXCL | O_NOFOLLOW, mode));
  if (!fd.valid() && errno == EEXIST) {
    // Something is there: look at it without opening it, then reopen that very inode.
    UniqueFd path_fd(::openat(dir_fd, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!path_fd.valid())
      return fail(system_error(errno, "cannot open " + shown));
    struct stat status {};
    if (::fstat(path_fd.get(), &status) != 0)
      return fail(system_error(errno, "cannot inspect " + shown));
    if (!S_ISREG(status.st_mode))
      return fail(refused("refusing to append to " + shown + ": it is " + kind_of(status.st_mode) +
                          ", not a regular file; remove it"));
    if (status.st_uid != ::geteuid() || status.st_nlink != 1)
      return fail(refused(
          fmt::format("refusing to append to {}: it {}, not flamebpf's own file; remove it", shown,
                      status.st_nlink != 1 ? fmt::format("has {} links", status.st_nlink)
                                           : fmt::format("belongs to uid {}", status.st_uid))));
    std::string self = "/proc/self/fd/" + std::to_string(path_fd.get());
    fd.reset(::open(self.c_str(), kAppend));
  }
  if (!fd.valid())
    return fail(system_error(errno, "cannot open " + shown));
  ssize_t n = ::write(fd.get(), bytes.data(), bytes.size());
  if (n != static_cast<ssize_t>(bytes.size())) {
    int saved = n < 0 ? errno : ENOSPC;
    // A torn line would corrupt the file for readers: cut it off again.
    if (n > 0) {
      off_t end = ::lseek(fd.get(), 0, SEEK_END);
      if (end >= n)
        (void)::ftruncate(fd.get(), end - n);
    }
    return fail(system_error(saved, "cannot append to " + shown));
  }
  return {};
}

bool is_temporary_name(std::string_view name)
{
  size_t mark = name.rfind(kTemporaryMark);
  if (mark == std::string_view::npos)
    return false;
  std::string_view tail = name.substr(mark + kTemporaryMark.size());
  if (tail.empty())
    return false;
  bool digits = tail.find_first_not_of("0123456789") == std::string_view::npos;
  bool hex = tail.size() == kTemporaryHexDigits &&
             tail.find_first_not_of("0123456789abcdef") == std::string_view::npos;
  // "<name>.tmp.<pid>" of earlier versions; ".<name>.tmp.<16 hex digits>" now.
  return (hex && name.starts_with('.')) || digits;
}

Result<> write_output_file(const std::string& path,
                           const FileAccess& access,
                           const ContentWriter& write_content)
{
  if (auto fd = own_descriptor(path)) {
    auto content = content_of(write_content);
    if (!content)
      return fail(content.error());
    return write_all(*fd, *content, path);
  }
  auto place = place_of(path);
  if (!place)
    return fail(place.error());
  auto content = content_of(write_content);
  if (!content)
    return fail(content.error());
  if (place->null_device)
    return {};
  return write_bytes_at(place->directory.get(), place->name, access, *content, path);
}

Result<> check_output_path(const std::string& path)
{
  if (own_descriptor(path))
    return {};
  auto place = place_of(path);
  if (!place)
    return fail(place.error());
  return {};
}

} // namespace flamebpf
