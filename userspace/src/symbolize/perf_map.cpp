#include "symbolize/perf_map.h"

#include <algorithm>

#include "common/log.h"
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
    : AppendedLinesReader(host_pid,
                          std::move(proc_root),
                          "/tmp/perf-" + std::to_string(ns_pid) + ".map",
                          {kMaxLine, kMaxReadPerInterval, kMaxParsePerInterval},
                          "its JIT frames stay unnamed")
{
  table_.charge_to(std::move(share));
}

void PerfMapReader::report()
{
  // The file belongs to the process, maybe a hostile one: one warning per kind, then only counts
  // (and debug lines).
  if (bad_lines() != bad_lines_reported_) {
    if (bad_lines_reported_ == 0)
      spdlog::warn("{}: skipped {} malformed lines", file_.path(), bad_lines());
    else
      spdlog::debug("{}: {} malformed lines skipped so far", file_.path(), bad_lines());
    bad_lines_reported_ = bad_lines();
  }
  if (ignored_lines_ > 0 && !full_reported_) {
    spdlog::warn("{}: more than {} entries; later ones are ignored", file_.path(), kMaxEntries);
    full_reported_ = true;
  }
  if (long_names_ > 0 && !long_names_reported_) {
    spdlog::warn("{}: names longer than {} KiB are cut short, ending in {}", file_.path(),
                 kMaxPerfMapName >> 10, kTruncated);
    long_names_reported_ = true;
  }
  if (names_over_budget_ > 0 && !names_over_budget_reported_) {
    spdlog::warn("{}: its names take more than {} MiB; further names are read as {}", file_.path(),
                 PerfMapTable::kMaxNameBytes >> 20, kTruncated);
    names_over_budget_reported_ = true;
  }
}

void PerfMapReader::take_line(std::string_view line, uint64_t /*offset*/)
{
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
}

} // namespace flamebpf::symbolize
