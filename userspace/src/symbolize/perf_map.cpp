#include "symbolize/perf_map.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <sys/stat.h>
#include <unistd.h>

#include "common/contained_file.h"
#include "common/log.h"

namespace flamebpf::symbolize {
namespace {

std::optional<uint64_t> parse_hex(std::string_view text)
{
  if (text.starts_with("0x") || text.starts_with("0X"))
    text.remove_prefix(2);
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    return std::nullopt;
  return value;
}

} // namespace

std::optional<PerfMapEntry> parse_perf_map_line(std::string_view line)
{
  if (!line.empty() && line.back() == '\r')
    line.remove_suffix(1);
  size_t first = line.find(' ');
  if (first == std::string_view::npos)
    return std::nullopt;
  size_t second = line.find(' ', first + 1);
  if (second == std::string_view::npos)
    return std::nullopt;
  auto start = parse_hex(line.substr(0, first));
  auto size = parse_hex(line.substr(first + 1, second - first - 1));
  // The name is the rest of the line: names contain spaces.
  std::string_view name = line.substr(second + 1);
  if (!start || !size || *size == 0 || *start + *size < *start || name.empty())
    return std::nullopt;
  return PerfMapEntry{*start, *start + *size, std::string(name)};
}

void PerfMapTable::insert(PerfMapEntry entry)
{
  // Trim or remove what the new entry overlaps; a range it splits keeps both outer parts.
  auto it = entries_.lower_bound(entry.start);
  if (it != entries_.begin()) {
    auto before = std::prev(it);
    if (before->second.end > entry.start) {
      if (before->second.end > entry.end) {
        PerfMapEntry tail = before->second;
        tail.start = entry.end;
        entries_.emplace(tail.start, std::move(tail));
      }
      before->second.end = entry.start;
    }
  }
  it = entries_.lower_bound(entry.start);
  while (it != entries_.end() && it->first < entry.end) {
    if (it->second.end > entry.end) {
      PerfMapEntry tail = std::move(it->second);
      tail.start = entry.end;
      entries_.erase(it);
      entries_.emplace(tail.start, std::move(tail));
      break;
    }
    it = entries_.erase(it);
  }
  entries_[entry.start] = std::move(entry);
}

const PerfMapEntry* PerfMapTable::find(uint64_t address) const
{
  auto it = entries_.upper_bound(address);
  if (it == entries_.begin())
    return nullptr;
  --it;
  return address < it->second.end ? &it->second : nullptr;
}

PerfMapReader::PerfMapReader(uint32_t host_pid, uint32_t ns_pid, std::string proc_root)
    : host_pid_(host_pid), ns_pid_(ns_pid), proc_root_(std::move(proc_root))
{
}

std::string PerfMapReader::path() const
{
  return proc_root_ + "/" + std::to_string(host_pid_) + "/root/tmp/perf-" +
         std::to_string(ns_pid_) + ".map";
}

std::optional<std::chrono::system_clock::time_point> PerfMapReader::modified() const
{
  struct stat status {};
  if (!fd_.valid() || ::fstat(fd_.get(), &status) != 0)
    return std::nullopt;
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::seconds(status.st_mtim.tv_sec) +
          std::chrono::nanoseconds(status.st_mtim.tv_nsec)));
}

void PerfMapReader::start_over(UniqueFd fd, uint64_t device, uint64_t inode)
{
  fd_ = std::move(fd);
  device_ = device;
  inode_ = inode;
  offset_ = 0;
  partial_.clear();
  skipping_ = false;
  table_.clear();
}

void PerfMapReader::refresh()
{
  // While the process lives, its map's path says which file is current; once it is gone, the
  // file already open is all there is.
  std::string root = proc_root_ + "/" + std::to_string(host_pid_) + "/root";
  auto current = open_contained(root, "/tmp/perf-" + std::to_string(ns_pid_) + ".map");
  if (current) {
    struct stat status {};
    if (::fstat(current->get(), &status) == 0 &&
        (!fd_.valid() || status.st_dev != device_ || status.st_ino != inode_))
      start_over(std::move(*current), status.st_dev, status.st_ino);
  }
  if (!fd_.valid())
    return;
  struct stat status {};
  if (::fstat(fd_.get(), &status) != 0)
    return;
  uint64_t size = static_cast<uint64_t>(status.st_size);
  if (size < offset_) {
    // Truncated and rewritten in place: read it again from the start.
    UniqueFd same(::dup(fd_.get()));
    start_over(std::move(same), device_, inode_);
  }
  size_t read_budget = kMaxReadPerRefresh;
  size_t parse_budget = kMaxParsePerRefresh;
  std::string chunk;
  while (offset_ < size && read_budget > 0 && parse_budget > 0) {
    if (skipping_) {
      // A hole (a sparse file's NULs) inside a line being skipped need not be read.
      off_t data = ::lseek(fd_.get(), static_cast<off_t>(offset_), SEEK_DATA);
      if (data < 0 && errno == ENXIO)
        data = static_cast<off_t>(size); // nothing but hole up to the end
      if (data > static_cast<off_t>(offset_)) {
        offset_ = std::min<uint64_t>(static_cast<uint64_t>(data), size);
        continue;
      }
    }
    chunk.resize(std::min<uint64_t>({size - offset_, read_budget, 1 << 20}));
    ssize_t n = ::pread(fd_.get(), chunk.data(), chunk.size(), static_cast<off_t>(offset_));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    offset_ += static_cast<uint64_t>(n);
    read_budget -= static_cast<size_t>(n);
    size_t parsed = take_lines(std::string_view(chunk.data(), static_cast<size_t>(n)));
    parse_budget -= std::min(parse_budget, parsed);
  }
}

size_t PerfMapReader::take_lines(std::string_view text)
{
  size_t parsed = 0;
  while (!text.empty()) {
    size_t newline = text.find('\n');
    std::string_view piece = text.substr(0, newline);
    bool complete = newline != std::string_view::npos;
    text.remove_prefix(complete ? newline + 1 : text.size());
    if (skipping_) {
      skipping_ = !complete;
      continue;
    }
    if (partial_.size() + piece.size() > kMaxLine) {
      ++bad_lines_;
      partial_.clear();
      skipping_ = !complete;
      continue;
    }
    parsed += piece.size() + (complete ? 1 : 0);
    if (!complete) {
      // The writer has not finished this line: it waits for the next refresh.
      partial_.append(piece);
      continue;
    }
    std::string_view line = piece;
    if (!partial_.empty()) {
      partial_.append(piece);
      line = partial_;
    }
    if (!line.empty()) {
      auto entry = parse_perf_map_line(line);
      if (!entry)
        ++bad_lines_;
      else if (table_.size() < kMaxEntries)
        table_.insert(std::move(*entry));
      else
        ++ignored_lines_;
    }
    partial_.clear();
  }
  return parsed;
}

} // namespace flamebpf::symbolize
