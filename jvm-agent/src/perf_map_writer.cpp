#include "perf_map_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

namespace flamebpf::agent {
namespace {

// Locks a mutex for a scope; pthread's, because nothing in the agent may throw.
class Lock {
public:
  explicit Lock(pthread_mutex_t& mutex) : mutex_(mutex) { pthread_mutex_lock(&mutex_); }
  ~Lock() { pthread_mutex_unlock(&mutex_); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

private:
  pthread_mutex_t& mutex_;
};

bool write_all(int fd, std::string_view bytes)
{
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// 16 hex digits no one can guess, for names beside the map that others must not occupy first.
std::string random_hex()
{
  uint64_t value = 0;
  if (::getrandom(&value, sizeof value, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof value)) {
    // The kernel's pool is not ready this early after boot: weaker, but nothing another user
    // could know in advance.
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    value = (static_cast<uint64_t>(now.tv_nsec) << 20) ^ static_cast<uint64_t>(now.tv_sec) ^
            (static_cast<uint64_t>(::getpid()) << 44) ^ reinterpret_cast<uintptr_t>(&value);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(value));
  return hex;
}

bool parse_hex(std::string_view text, uint64_t& value)
{
  if (text.empty() || text.size() > 16)
    return false;
  value = 0;
  for (char c : text) {
    int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (digit < 0)
      return false;
    value = value * 16 + static_cast<uint64_t>(digit);
  }
  return true;
}

} // namespace

std::string perf_map_line(uint64_t start, uint64_t size, std::string_view name)
{
  char numbers[48];
  int length =
      std::snprintf(numbers, sizeof numbers, "%llx %llx ", static_cast<unsigned long long>(start),
                    static_cast<unsigned long long>(size));
  std::string line(numbers, static_cast<size_t>(length));
  line += name;
  line.push_back('\n');
  return line;
}

PerfMapWriter::PerfMapWriter() = default;

PerfMapWriter::~PerfMapWriter()
{
  if (fd_ >= 0)
    ::close(fd_);
  if (dir_fd_ >= 0)
    ::close(dir_fd_);
}

int PerfMapWriter::create_beside(std::string& name)
{
  for (int attempt = 0; attempt < 3; ++attempt) {
    name = "." + name_ + "." + random_hex();
    int fd = ::openat(dir_fd_, name.c_str(),
                      O_RDWR | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0 || errno != EEXIST)
      return fd;
  }
  return -1;
}

bool PerfMapWriter::open(const std::string& directory, int pid)
{
  return open_named(directory, "perf-" + std::to_string(pid) + ".map");
}

bool PerfMapWriter::open_named(const std::string& directory, const std::string& file_name)
{
  Lock lock(mutex_);
  if (fd_ >= 0)
    return true;
  open_error_.clear();
  name_ = file_name;
  path_ = directory + "/" + name_;
  if (dir_fd_ < 0)
    dir_fd_ = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd_ < 0) {
    open_error_ = path_ + ": cannot open " + directory + ": " + std::strerror(errno);
    return false;
  }
  // O_EXCL: whatever has the name already (a FIFO, a link, a map of someone else's) is never
  // opened, so it can neither block the JVM nor take its writes.
  int fd = ::openat(dir_fd_, name_.c_str(),
                    O_RDWR | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0 && errno == EEXIST) {
    std::string fresh;
    fd = create_beside(fresh);
    if (fd >= 0 && ::renameat(dir_fd_, fresh.c_str(), dir_fd_, name_.c_str()) != 0) {
      int rename_error = errno;
      ::unlinkat(dir_fd_, fresh.c_str(), 0);
      ::close(fd);
      fd = -1;
      struct stat holder {};
      if ((rename_error == EPERM || rename_error == EACCES) &&
          ::fstatat(dir_fd_, name_.c_str(), &holder, AT_SYMLINK_NOFOLLOW) == 0 &&
          holder.st_uid != ::geteuid())
        open_error_ = path_ + ": held by uid " + std::to_string(holder.st_uid) +
                      ", which this JVM's user cannot replace";
      else
        open_error_ = path_ + ": cannot replace what is there: " + std::strerror(rename_error);
      return false;
    }
  }
  if (fd < 0) {
    open_error_ = path_ + ": " + std::strerror(errno);
    return false;
  }
  fd_ = fd;
  file_bytes_ = 0;
  return true;
}

bool PerfMapWriter::is_open() const
{
  Lock lock(mutex_);
  return fd_ >= 0;
}

std::string PerfMapWriter::open_error() const
{
  Lock lock(mutex_);
  return open_error_;
}

bool PerfMapWriter::append(std::string_view text)
{
  if (fd_ < 0 || !write_all(fd_, text)) {
    lost_lines_ += static_cast<uint64_t>(std::count(text.begin(), text.end(), '\n'));
    // A partial write leaves a torn line; where the file ends now is unknown.
    struct stat status {};
    if (fd_ >= 0 && ::fstat(fd_, &status) == 0)
      file_bytes_ = static_cast<uint64_t>(status.st_size);
    return false;
  }
  file_bytes_ += text.size();
  return true;
}

void PerfMapWriter::add(uint64_t start, uint64_t size, const std::vector<Line>& lines)
{
  std::string text;
  for (const auto& line : lines)
    text += perf_map_line(line.start, line.size, line.name);
  Lock lock(mutex_);
  // New code at an address replaces whatever was there: the old lines are dead.
  if (auto previous = live_.find(start); previous != live_.end())
    live_bytes_ -= previous->second.line_bytes;
  live_.erase(start);
  // One write, so a reader never sees half of a method's lines.
  if (!append(text))
    return;
  live_[start] = Owner{size, file_bytes_ - text.size(), text.size()};
  live_bytes_ += text.size();
}

bool PerfMapWriter::append_lines(std::string_view lines)
{
  Lock lock(mutex_);
  return append(lines);
}

void PerfMapWriter::add(uint64_t start, uint64_t size, std::string_view name)
{
  add(start, size, std::vector<Line>{{start, size, std::string(name)}});
}

void PerfMapWriter::remove(uint64_t owner)
{
  Lock lock(mutex_);
  auto it = live_.find(owner);
  if (it == live_.end())
    return;
  live_bytes_ -= it->second.line_bytes;
  live_.erase(it);
  if (file_bytes_ >= kMinCompactBytes && live_bytes_ * 2 < file_bytes_)
    compact();
}

void PerfMapWriter::compact()
{
  if (fd_ < 0)
    return;
  std::string temporary;
  int out = create_beside(temporary);
  if (out < 0)
    return;
  // Reads back only what this agent wrote to its own file, in pieces: the first file_bytes_
  // bytes. Keeps, in order, the lines of the code live now: inside a live owner and written since
  // it appeared. Readers let later lines win, so keeping the order keeps the result right.
  struct stat status {};
  uint64_t end = ::fstat(fd_, &status) == 0
                     ? std::min<uint64_t>(file_bytes_, static_cast<uint64_t>(status.st_size))
                     : 0;
  std::map<uint64_t, Owner> moved;
  uint64_t kept_bytes = 0;
  uint64_t dropped_lines = 0;
  std::string batch; // kept lines not yet written
  std::string line;  // the line being read, from line_offset on
  uint64_t line_offset = 0;
  bool too_long = false;
  bool ok = true;
  auto keep = [&](std::string_view text, uint64_t offset) {
    size_t space = text.find(' ');
    uint64_t start = 0;
    if (space == std::string_view::npos || !parse_hex(text.substr(0, space), start))
      return;
    auto owner = live_.upper_bound(start);
    if (owner == live_.begin())
      return;
    --owner;
    if (start >= owner->first + owner->second.size || offset < owner->second.first_offset)
      return;
    auto [entry, inserted] =
        moved.try_emplace(owner->first, Owner{owner->second.size, kept_bytes, 0});
    entry->second.line_bytes += text.size();
    kept_bytes += text.size();
    batch += text;
  };
  char buffer[65536];
  for (uint64_t offset = 0; ok && offset < end;) {
    ssize_t n =
        ::pread(fd_, buffer, static_cast<size_t>(std::min<uint64_t>(sizeof buffer, end - offset)),
                static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      ok = false;
      break;
    }
    std::string_view chunk(buffer, static_cast<size_t>(n));
    uint64_t chunk_offset = offset;
    offset += static_cast<uint64_t>(n);
    while (!chunk.empty()) {
      size_t newline = chunk.find('\n');
      std::string_view piece =
          chunk.substr(0, newline == std::string_view::npos ? chunk.size() : newline + 1);
      if (line.empty() && !too_long)
        line_offset = chunk_offset;
      if (!too_long && line.size() + piece.size() <= kMaxLineBytes)
        line += piece;
      else
        too_long = true;
      chunk_offset += piece.size();
      chunk.remove_prefix(piece.size());
      if (newline == std::string_view::npos)
        break;
      if (too_long)
        ++dropped_lines;
      else
        keep(line, line_offset);
      line.clear();
      too_long = false;
      if (batch.size() >= sizeof buffer) {
        ok = write_all(out, batch);
        batch.clear();
      }
    }
  }
  // A torn last line (a write that failed) is dropped.
  ok = ok && write_all(out, batch) && ::fsync(out) == 0 &&
       ::renameat(dir_fd_, temporary.c_str(), dir_fd_, name_.c_str()) == 0;
  if (!ok) {
    ::unlinkat(dir_fd_, temporary.c_str(), 0);
    ::close(out);
    return; // keep appending to the old file: readers still see its lines
  }
  // The new file is the map now, and appends go to it.
  ::close(fd_);
  fd_ = out;
  lost_lines_ += dropped_lines;
  // Owners with no line left (a write that failed) start afresh at the end.
  for (auto& [start, owner] : live_) {
    auto it = moved.find(start);
    owner = it != moved.end() ? it->second : Owner{owner.size, kept_bytes, 0};
  }
  file_bytes_ = kept_bytes;
  live_bytes_ = kept_bytes;
  ++compactions_;
}

} // namespace flamebpf::agent
