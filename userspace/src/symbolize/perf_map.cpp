#include "symbolize/perf_map.h"

#include <algorithm>
#include <cerrno>
#include <sys/stat.h>
#include <unistd.h>

#include "common/contained_file.h"
#include "common/log.h"
#include "common/procfs.h"
#include "common/text.h"
#include "method_name.h"
#include "symbolize/name_cut.h"

namespace flamebpf::symbolize {
namespace {

std::optional<uint64_t> parse_hex(std::string_view text)
{
  if (text.starts_with("0x") || text.starts_with("0X"))
    text.remove_prefix(2);
  return text::parse_number<uint64_t>(text, 16);
}

} // namespace

std::optional<PerfMapEntry> parse_perf_map_line(std::string_view line, size_t max_name)
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
  bool truncated = name.size() > max_name;
  // An inline chain loses whole methods, so that its frames stay Java frames.
  return PerfMapEntry{*start, *start + *size, cut_name(name, max_name, agent::kInlineSeparator),
                      truncated};
}

bool perf_map_owner_trusted(uint32_t file_uid, uint32_t process_euid)
{
  return file_uid == 0 || file_uid == process_euid;
}

PerfMapTable::PerfMapTable(size_t max_name_bytes)
    : max_name_bytes_(max_name_bytes),
      over_budget_(std::make_shared<const Name>(Name{std::string(kTruncated), true}))
{
}

void PerfMapTable::release(const Range& range)
{
  if (range.name.use_count() == 1 && range.name != over_budget_) {
    name_bytes_ -= range.name->text.size();
    charge_.shrink(range.name->text.size() + kNameBytes);
  }
}

bool PerfMapTable::insert(PerfMapEntry entry)
{
  // The entry's range, and the second piece of a range it splits, at most.
  if (!charge_.grow(2 * kRangeBytes)) {
    ++share_refusals_;
    return false;
  }
  size_t ranges_before = ranges_.size();
  bool fitted = name_bytes_ + entry.name.size() <= max_name_bytes_;
  if (fitted && !charge_.grow(entry.name.size() + kNameBytes)) {
    ++share_refusals_;
    fitted = false;
  }
  std::shared_ptr<const Name> name = over_budget_;
  if (fitted) {
    name_bytes_ += entry.name.size();
    name = std::make_shared<const Name>(Name{std::move(entry.name), entry.truncated});
  }
  // Trim or remove what the new entry overlaps; a range it splits keeps both outer parts, which
  // share its name.
  auto it = ranges_.lower_bound(entry.start);
  if (it != ranges_.begin()) {
    auto before = std::prev(it);
    if (before->second.end > entry.start) {
      if (before->second.end > entry.end)
        ranges_.emplace(entry.end, Range{before->second.end, before->second.name});
      before->second.end = entry.start;
    }
  }
  it = ranges_.lower_bound(entry.start);
  while (it != ranges_.end() && it->first < entry.end) {
    if (it->second.end > entry.end) {
      Range tail = std::move(it->second);
      ranges_.erase(it);
      ranges_.emplace(entry.end, std::move(tail));
      break;
    }
    release(it->second);
    it = ranges_.erase(it);
  }
  ranges_.insert_or_assign(entry.start, Range{entry.end, std::move(name)});
  // Ranges removed give back their charge with what was charged for ranges not made.
  charge_.shrink((ranges_before + 2 - ranges_.size()) * kRangeBytes);
  return fitted;
}

std::optional<PerfMapTable::Entry> PerfMapTable::find(uint64_t address) const
{
  auto it = ranges_.upper_bound(address);
  if (it == ranges_.begin())
    return std::nullopt;
  --it;
  if (address >= it->second.end)
    return std::nullopt;
  const Name& name = *it->second.name;
  return Entry{it->first, it->second.end, name.text, name.truncated};
}

void PerfMapTable::clear()
{
  ranges_.clear();
  name_bytes_ = 0;
  charge_.reset();
}

PerfMapReader::PerfMapReader(uint32_t host_pid,
                             uint32_t ns_pid,
                             std::string proc_root,
                             std::shared_ptr<MemoryShare> share)
    : host_pid_(host_pid), ns_pid_(ns_pid), proc_root_(std::move(proc_root))
{
  table_.charge_to(std::move(share));
}

std::string PerfMapReader::path() const
{
  return proc_root_ + "/" + std::to_string(host_pid_) + "/root/tmp/perf-" +
         std::to_string(ns_pid_) + ".map";
}

std::optional<std::chrono::system_clock::time_point> PerfMapReader::modified() const
{
  return modified_;
}

void PerfMapReader::start_over(UniqueFd fd, uint64_t device, uint64_t inode)
{
  fd_ = std::move(fd);
  device_ = device;
  inode_ = inode;
  offset_ = 0;
  reread_requested_.store(false, std::memory_order_relaxed);
  lines_.clear();
  table_.clear();
  if (!fd_.valid())
    modified_.reset();
  started_over_in_interval_ = true;
}

void PerfMapReader::begin_interval()
{
  read_in_interval_ = 0;
  parsed_in_interval_ = 0;
  started_over_in_interval_ = false;
  over_budget_in_interval_ = false;
}

void PerfMapReader::note_over_budget()
{
  if (!over_budget_in_interval_)
    ++intervals_over_budget_;
  over_budget_in_interval_ = true;
}

bool PerfMapReader::owner_trusted(uint32_t owner, uint64_t device, uint64_t inode)
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
  if (euid && perf_map_owner_trusted(owner, *euid))
    return true;
  ++refused_files_;
  refused_device_ = device;
  refused_inode_ = inode;
  refused_owner_ = owner;
  refused_for_euid_ = euid;
  return false;
}

void PerfMapReader::report()
{
  // The file belongs to the process, maybe a hostile one: one warning per kind, then only counts
  // (and debug lines).
  if (bad_lines_ != bad_lines_reported_) {
    if (bad_lines_reported_ == 0)
      spdlog::warn("{}: skipped {} malformed lines", path(), bad_lines_);
    else
      spdlog::debug("{}: {} malformed lines skipped so far", path(), bad_lines_);
    bad_lines_reported_ = bad_lines_;
  }
  if (ignored_lines_ > 0 && !full_reported_) {
    spdlog::warn("{}: more than {} entries; later ones are ignored", path(), kMaxEntries);
    full_reported_ = true;
  }
  if (long_names_ > 0 && !long_names_reported_) {
    spdlog::warn("{}: names longer than {} KiB are cut short, ending in {}", path(),
                 kMaxPerfMapName >> 10, kTruncated);
    long_names_reported_ = true;
  }
  if (names_over_budget_ > 0 && !names_over_budget_reported_) {
    spdlog::warn("{}: its names take more than {} MiB; further names are read as {}", path(),
                 PerfMapTable::kMaxNameBytes >> 20, kTruncated);
    names_over_budget_reported_ = true;
  }
  if (intervals_over_budget_ > 0 && !over_budget_reported_) {
    spdlog::warn("{}: more to read than an interval allows ({} MiB of lines, {} MiB in all, one "
                 "read from the start); the rest waits for the next intervals",
                 path(), kMaxParsePerInterval >> 20, kMaxReadPerInterval >> 20);
    over_budget_reported_ = true;
  }
  if (refused_files_ > 0 && !refused_reported_) {
    std::string user = refused_for_euid_ ? "uid " + std::to_string(*refused_for_euid_) : "gone";
    spdlog::warn("{}: owned by uid {}, not by the process's user ({}) or root; not read, so its "
                 "JIT frames stay unnamed",
                 path(), refused_owner_, user);
    refused_reported_ = true;
  }
}

void PerfMapReader::refresh()
{
  read_new();
  report();
}

void PerfMapReader::read_new()
{
  // While the process lives, its map's path says which file is current; once it is gone, the
  // file already open is all there is.
  std::string root = proc_root_ + "/" + std::to_string(host_pid_) + "/root";
  auto current = open_contained(root, "/tmp/perf-" + std::to_string(ns_pid_) + ".map");
  if (current) {
    struct stat status {};
    if (::fstat(current->get(), &status) == 0 &&
        (!fd_.valid() || status.st_dev != device_ || status.st_ino != inode_)) {
      if (!owner_trusted(status.st_uid, status.st_dev, status.st_ino)) {
        // What was read belongs to a file that is no longer the map.
        if (fd_.valid()) {
          start_over(UniqueFd(), 0, 0);
          started_over_in_interval_ = false;
        }
        return;
      }
      // A map replaced again within the interval is read from its start in the next one: a
      // process that replaces its map all the time costs one read per interval.
      if (fd_.valid() && started_over_in_interval_)
        note_over_budget();
      else
        start_over(std::move(*current), status.st_dev, status.st_ino);
    }
  }
  if (!fd_.valid())
    return;
  struct stat status {};
  if (::fstat(fd_.get(), &status) != 0)
    return;
  modified_ = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::seconds(status.st_mtim.tv_sec) +
          std::chrono::nanoseconds(status.st_mtim.tv_nsec)));
  uint64_t size = static_cast<uint64_t>(status.st_size);
  bool rewritten = reread_requested_.load(std::memory_order_relaxed);
  if (size < offset_ || rewritten) {
    // Truncated and rewritten in place: read it again from the start, once per interval. A
    // rewrite flamebpf asked for (HotSpot's, paced by the attacher) is no budget's trouble: it
    // just waits for the next interval.
    if (started_over_in_interval_) {
      if (!rewritten)
        note_over_budget();
      return;
    }
    UniqueFd same(::dup(fd_.get()));
    start_over(std::move(same), device_, inode_);
  }
  std::string chunk;
  while (offset_ < size) {
    if (read_in_interval_ >= kMaxReadPerInterval || parsed_in_interval_ >= kMaxParsePerInterval) {
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
        {size - offset_, kMaxReadPerInterval - read_in_interval_, uint64_t{1} << 20}));
    ssize_t n = ::pread(fd_.get(), chunk.data(), chunk.size(), static_cast<off_t>(offset_));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    offset_ += static_cast<uint64_t>(n);
    read_in_interval_ += static_cast<size_t>(n);
    parsed_in_interval_ += take_lines(std::string_view(chunk.data(), static_cast<size_t>(n)));
  }
}

size_t PerfMapReader::take_lines(std::string_view text)
{
  auto taken = lines_.take(text, [this](std::string_view line) {
    auto entry = parse_perf_map_line(line);
    if (!entry) {
      ++bad_lines_;
    } else if (table_.size() >= kMaxEntries) {
      ++ignored_lines_;
    } else {
      long_names_ += entry->truncated;
      uint64_t refused_before = table_.share_refusals();
      // A share's refusal is said by the share, for the whole target.
      if (!table_.insert(std::move(*entry)) && table_.share_refusals() == refused_before)
        ++names_over_budget_;
    }
  });
  bad_lines_ += taken.overlong;
  return taken.kept_bytes;
}

} // namespace flamebpf::symbolize
