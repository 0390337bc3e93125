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
  if (range.name && range.name.use_count() == 1 && range.name != over_budget_) {
    name_bytes_ -= range.name->text.size();
    charge_.shrink(range.name->text.size() + kNameBytes);
  }
}

std::shared_ptr<const PerfMapTable::Name>
PerfMapTable::hold_name(std::string text, bool truncated, bool& fitted)
{
  fitted = name_bytes_ + text.size() <= max_name_bytes_;
  if (fitted && !charge_.grow(text.size() + kNameBytes)) {
    ++share_refusals_;
    fitted = false;
  }
  if (!fitted)
    return over_budget_;
  name_bytes_ += text.size();
  return std::make_shared<const Name>(Name{std::move(text), truncated});
}

bool PerfMapTable::insert(PerfMapEntry entry)
{
  // The entry's range, and the second piece of a range it splits, at most.
  if (!charge_.grow(2 * kRangeBytes)) {
    ++share_refusals_;
    return false;
  }
  bool fitted = true;
  auto name = hold_name(std::move(entry.name), entry.truncated, fitted);
  place(entry.start, Range{entry.end, std::move(name)});
  return fitted;
}

bool PerfMapTable::insert_line(uint64_t start, uint64_t end, uint64_t line, uint32_t line_bytes)
{
  if (!charge_.grow(2 * kRangeBytes)) {
    ++share_refusals_;
    return false;
  }
  place(start, Range{end, nullptr, line, line_bytes});
  return true;
}

void PerfMapTable::place(uint64_t start, Range range)
{
  uint64_t end = range.end;
  size_t ranges_before = ranges_.size();
  // Trim or remove what the new range overlaps; a range it splits keeps both outer parts, which
  // share its name (or its line).
  auto it = ranges_.lower_bound(start);
  if (it != ranges_.begin()) {
    auto before = std::prev(it);
    if (before->second.end > start) {
      if (before->second.end > end) {
        Range tail = before->second;
        ranges_.emplace(end, std::move(tail));
      }
      before->second.end = start;
    }
  }
  it = ranges_.lower_bound(start);
  while (it != ranges_.end() && it->first < end) {
    if (it->second.end > end) {
      Range tail = std::move(it->second);
      ranges_.erase(it);
      ranges_.emplace(end, std::move(tail));
      break;
    }
    release(it->second);
    it = ranges_.erase(it);
  }
  ranges_.insert_or_assign(start, std::move(range));
  // Ranges removed give back their charge with what was charged for ranges not made.
  charge_.shrink((ranges_before + 2 - ranges_.size()) * kRangeBytes);
}

bool PerfMapTable::keep_name(uint64_t start, std::string name, bool truncated)
{
  auto it = ranges_.find(start);
  if (it == ranges_.end() || it->second.name)
    return true;
  bool fitted = true;
  it->second.name = hold_name(std::move(name), truncated, fitted);
  return fitted;
}

std::optional<PerfMapTable::Entry> PerfMapTable::find(uint64_t address) const
{
  auto it = ranges_.upper_bound(address);
  if (it == ranges_.begin())
    return std::nullopt;
  --it;
  const Range& range = it->second;
  if (address >= range.end)
    return std::nullopt;
  if (!range.name)
    return Entry{it->first, range.end, {}, false, range.line, range.line_bytes};
  if (range.name->text.empty())
    return std::nullopt; // its line named it no more when read
  return Entry{it->first, range.end, range.name->text, range.name->truncated};
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

void PerfMapReader::take_line(std::string_view line, uint64_t offset)
{
  auto entry = parse_perf_map_line(line);
  if (!entry) {
    ++bad_lines_;
  } else if (table_.size() >= kMaxEntries) {
    ++ignored_lines_;
  } else {
    long_names_ += entry->truncated;
    // Only where the name is: it is read when a frame needs it (read_name). A line is at most
    // kMaxLine bytes.
    table_.insert_line(entry->start, entry->end, offset, static_cast<uint32_t>(line.size()));
  }
}

void PerfMapReader::read_name(uint64_t address)
{
  auto entry = table_.find(address);
  if (!entry || !entry->line)
    return;
  // The file is the target's: what is there now is parsed again, and believed only if it still
  // names a range holding the entry (a later line may have split it).
  auto line = file_.line_at(*entry->line, entry->line_bytes);
  auto parsed = line ? parse_perf_map_line(*line) : std::nullopt;
  bool names_it = parsed && parsed->start <= entry->start && entry->end <= parsed->end;
  uint64_t refused_before = table_.share_refusals();
  bool kept = names_it ? table_.keep_name(entry->start, std::move(parsed->name), parsed->truncated)
                       : table_.keep_name(entry->start, std::string(), false);
  // A share's refusal is said by the share, for the whole target.
  if (!kept && table_.share_refusals() == refused_before)
    ++names_over_budget_;
}

} // namespace flamebpf::symbolize
