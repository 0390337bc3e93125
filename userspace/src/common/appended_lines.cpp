#include "common/appended_lines.h"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/contained_file.h"
#include "common/log.h"
#include "common/procfs.h"

namespace flamebpf {

namespace {

// The most one pread takes: a chunk is held while its lines are passed on.
constexpr uint64_t kChunkBytes = 1 << 20;

} // namespace

bool appended_file_owner_trusted(uint32_t file_uid, uint32_t process_euid)
{
  return file_uid == 0 || file_uid == process_euid;
}

AppendedLines::AppendedLines(uint32_t host_pid,
                             std::string proc_root,
                             std::string path_in_root,
                             Budgets budgets,
                             std::string refusal_cost)
    : host_pid_(host_pid), proc_root_(std::move(proc_root)), path_in_root_(std::move(path_in_root)),
      budgets_(budgets), refusal_cost_(std::move(refusal_cost)), lines_(budgets.max_line)
{
}

std::string AppendedLines::path() const
{
  return proc_root_ + "/" + std::to_string(host_pid_) + "/root" + path_in_root_;
}

void AppendedLines::start_over(UniqueFd fd, uint64_t device, uint64_t inode)
{
  fd_ = std::move(fd);
  device_ = device;
  inode_ = inode;
  offset_ = 0;
  reread_requested_.store(false, std::memory_order_relaxed);
  lines_.clear();
  if (!fd_.valid())
    modified_.reset();
  started_over_in_interval_ = true;
  ++changes_;
}

void AppendedLines::begin_interval()
{
  read_in_interval_ = 0;
  passed_in_interval_ = 0;
  started_over_in_interval_ = false;
  over_budget_in_interval_ = false;
}

void AppendedLines::note_over_budget()
{
  if (!over_budget_in_interval_)
    ++intervals_over_budget_;
  over_budget_in_interval_ = true;
}

bool AppendedLines::owner_trusted(uint32_t owner, uint64_t device, uint64_t inode)
{
  if (owner == 0)
    return true;
  if (refused_files_ > 0 && device == refused_device_ && inode == refused_inode_ &&
      owner == refused_owner_)
    return false; // refused already, and said
  // The process's effective user now, as the host sees it (flamebpf reads /proc from the host's
  // user namespace); unknown for a process that is gone, and then nothing new is believed.
  auto status =
      procfs::read_file(proc_root_ + "/" + std::to_string(host_pid_) + "/status", 64 << 10);
  auto euid = status ? procfs::status_field(*status, "Uid", 1) : std::nullopt;
  if (euid && appended_file_owner_trusted(owner, *euid))
    return true;
  ++refused_files_;
  refused_device_ = device;
  refused_inode_ = inode;
  refused_owner_ = owner;
  refused_for_euid_ = euid;
  return false;
}

void AppendedLines::report()
{
  if (intervals_over_budget_ > 0 && !over_budget_reported_) {
    spdlog::warn("{}: more to read than an interval allows ({} MiB of lines, {} MiB in all, one "
                 "read from the start); the rest waits for the next intervals",
                 path(), budgets_.max_lines_per_interval >> 20,
                 budgets_.max_read_per_interval >> 20);
    over_budget_reported_ = true;
  }
  if (refused_files_ > 0 && !refused_reported_) {
    std::string user = refused_for_euid_ ? "uid " + std::to_string(*refused_for_euid_) : "gone";
    spdlog::warn("{}: owned by uid {}, not by the process's user ({}) or root; not read, so {}",
                 path(), refused_owner_, user, refusal_cost_);
    refused_reported_ = true;
  }
}

bool AppendedLines::follow_path(const std::function<void()>& on_start_over)
{
  ++path_lookups_;
  path_looked_up_ = std::chrono::steady_clock::now();
  // While the process lives, the path says which file is current; once it is gone, the file
  // already open is all there is.
  std::string root = proc_root_ + "/" + std::to_string(host_pid_) + "/root";
  auto current = open_contained(root, path_in_root_);
  if (!current)
    return true;
  struct stat status {};
  if (::fstat(current->get(), &status) != 0 ||
      (fd_.valid() && status.st_dev == device_ && status.st_ino == inode_))
    return true;
  if (!owner_trusted(status.st_uid, status.st_dev, status.st_ino)) {
    // What was read belongs to a file that is no longer the process's.
    if (fd_.valid()) {
      start_over(UniqueFd(), 0, 0);
      on_start_over();
      started_over_in_interval_ = false;
    }
    return false;
  }
  // A file replaced again within the interval is read from its start in the next one.
  if (fd_.valid() && started_over_in_interval_) {
    note_over_budget();
  } else {
    start_over(std::move(*current), status.st_dev, status.st_ino);
    on_start_over();
  }
  return true;
}

void AppendedLines::read(const std::function<void()>& on_start_over,
                         const std::function<void(std::string_view line, uint64_t offset)>& on_line)
{
  struct stat status {};
  bool held = fd_.valid() && ::fstat(fd_.get(), &status) == 0;
  // A file renamed over the path unlinks the one held; other replacements wait for the period.
  if (!held || status.st_nlink == 0 ||
      std::chrono::steady_clock::now() - path_looked_up_ >= kPathCheckPeriod) {
    if (!follow_path(on_start_over))
      return;
    if (!fd_.valid() || ::fstat(fd_.get(), &status) != 0)
      return;
  }
  modified_ = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::seconds(status.st_mtim.tv_sec) +
          std::chrono::nanoseconds(status.st_mtim.tv_nsec)));
  uint64_t size = static_cast<uint64_t>(status.st_size);
  bool rewritten = reread_requested_.load(std::memory_order_relaxed);
  if (size < offset_ || rewritten) {
    // Truncated and rewritten in place: read it again from the start, once an interval. A
    // rewrite flamebpf asked for is no budget's trouble: it just waits for the next interval.
    if (started_over_in_interval_) {
      if (!rewritten)
        note_over_budget();
      return;
    }
    start_over(UniqueFd(::dup(fd_.get())), device_, inode_);
    on_start_over();
  }
  if (offset_ < size)
    ++changes_;
  std::string chunk;
  while (offset_ < size) {
    if (read_in_interval_ >= budgets_.max_read_per_interval ||
        passed_in_interval_ >= budgets_.max_lines_per_interval) {
      note_over_budget();
      break;
    }
    if (lines_.skipping()) {
      // A hole (a sparse file's NULs) inside a line being skipped need not be read.
      off_t data = ::lseek(fd_.get(), static_cast<off_t>(offset_), SEEK_DATA);
      if (data < 0 && errno == ENXIO)
        data = static_cast<off_t>(size); // nothing but hole up to the end
      if (data > static_cast<off_t>(offset_)) {
        offset_ = std::min<uint64_t>(static_cast<uint64_t>(data), size);
        continue;
      }
    }
    chunk.resize(std::min<uint64_t>(
        {size - offset_, budgets_.max_read_per_interval - read_in_interval_, kChunkBytes}));
    ssize_t n = ::pread(fd_.get(), chunk.data(), chunk.size(), static_cast<off_t>(offset_));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    uint64_t chunk_offset = offset_;
    offset_ += static_cast<uint64_t>(n);
    read_in_interval_ += static_cast<size_t>(n);
    auto taken = lines_.take(std::string_view(chunk.data(), static_cast<size_t>(n)),
                             [&](std::string_view line, size_t end) {
                               on_line(line, chunk_offset + end - line.size());
                             });
    overlong_lines_ += taken.overlong;
    passed_in_interval_ += taken.kept_bytes;
  }
}

bool AppendedLines::quiet_at_a_glance() const
{
  if (!fd_.valid() || reread_requested_.load(std::memory_order_relaxed) ||
      std::chrono::steady_clock::now() - path_looked_up_ >= kPathCheckPeriod)
    return false;
  struct statx status {};
  if (::statx(fd_.get(), "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_SIZE | STATX_NLINK,
              &status) != 0 ||
      (status.stx_mask & (STATX_SIZE | STATX_NLINK)) != (STATX_SIZE | STATX_NLINK))
    return false;
  return status.stx_nlink != 0 && status.stx_size == offset_;
}

std::optional<std::string> AppendedLines::line_at(uint64_t offset,
                                                  std::optional<size_t> length) const
{
  if (!fd_.valid() || (length && *length > budgets_.max_line))
    return std::nullopt;
  std::string line(length.value_or(budgets_.max_line) + 1, '\0');
  ssize_t n = ::pread(fd_.get(), line.data(), line.size(), static_cast<off_t>(offset));
  if (n <= 0)
    return std::nullopt;
  size_t newline = std::string_view(line.data(), static_cast<size_t>(n)).find('\n');
  if (newline == std::string_view::npos || (length && newline != *length))
    return std::nullopt;
  line.resize(newline);
  return line;
}

AppendedLinesReader::AppendedLinesReader(uint32_t host_pid,
                                         std::string proc_root,
                                         std::string path_in_root,
                                         AppendedLines::Budgets budgets,
                                         std::string refusal_cost)
    : file_(
          host_pid, std::move(proc_root), std::move(path_in_root), budgets, std::move(refusal_cost))
{
}

void AppendedLinesReader::refresh()
{
  file_.read([this] { start_over(); },
             [this](std::string_view line, uint64_t offset) { take_line(line, offset); });
  report();
  file_.report();
}

} // namespace flamebpf
