#include "perf_map_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fcntl.h>
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
}

bool PerfMapWriter::open(const std::string& directory, int pid)
{
  Lock lock(mutex_);
  directory_ = directory;
  path_ = directory + "/perf-" + std::to_string(pid) + ".map";
  // O_NOFOLLOW: a link planted at the map's path must not redirect the JVM's writes;
  // O_NONBLOCK: a FIFO planted there must not hang the JVM (it is refused below).
  fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
               0644);
  if (fd_ < 0)
    return false;
  struct stat status {};
  if (::fstat(fd_, &status) != 0 || !S_ISREG(status.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    return false;
  }
  // Lines already there belong to no code this agent knows: dead until a rewrite drops them.
  file_bytes_ = static_cast<uint64_t>(status.st_size);
  return true;
}

bool PerfMapWriter::is_open() const
{
  Lock lock(mutex_);
  return fd_ >= 0;
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
  int source = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (source < 0)
    return;
  std::string content;
  char buffer[65536];
  for (;;) {
    ssize_t n = ::read(source, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    content.append(buffer, static_cast<size_t>(n));
  }
  ::close(source);

  // Keep, in order, the lines of the code live now: inside a live owner and written since it
  // appeared. Readers let later lines win, so keeping the order keeps the result right.
  std::string kept;
  std::map<uint64_t, Owner> moved;
  size_t begin = 0;
  while (begin < content.size()) {
    size_t end = content.find('\n', begin);
    if (end == std::string::npos)
      break; // a torn last line: dropped
    std::string_view line(content.data() + begin, end - begin + 1);
    uint64_t offset = begin;
    begin = end + 1;
    size_t space = line.find(' ');
    uint64_t start = 0;
    if (space == std::string_view::npos || !parse_hex(line.substr(0, space), start))
      continue;
    auto owner = live_.upper_bound(start);
    if (owner == live_.begin())
      continue;
    --owner;
    if (start >= owner->first + owner->second.size || offset < owner->second.first_offset)
      continue;
    auto [entry, inserted] =
        moved.try_emplace(owner->first, Owner{owner->second.size, kept.size(), 0});
    entry->second.line_bytes += line.size();
    kept += line;
  }

  std::string temporary = path_ + "." + std::to_string(::getpid()) + ".compact";
  int out = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (out < 0)
    return;
  bool written = write_all(out, kept) && ::fsync(out) == 0;
  ::close(out);
  if (!written || ::rename(temporary.c_str(), path_.c_str()) != 0) {
    ::unlink(temporary.c_str());
    return;
  }
  int reopened = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
  if (reopened < 0)
    return; // keep appending to the old file: readers still see its lines until they reopen
  ::close(fd_);
  fd_ = reopened;
  // Owners with no line left (a write that failed) start afresh at the end.
  for (auto& [start, owner] : live_) {
    auto it = moved.find(start);
    owner = it != moved.end() ? it->second : Owner{owner.size, kept.size(), 0};
  }
  file_bytes_ = kept.size();
  live_bytes_ = kept.size();
  ++compactions_;
}

} // namespace flamebpf::agent
