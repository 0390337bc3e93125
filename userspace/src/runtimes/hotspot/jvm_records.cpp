#include "runtimes/hotspot/jvm_records.h"

#include <algorithm>
#include <cerrno>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/contained_file.h"
#include "common/procfs.h"
#include "common/text.h"

namespace flamebpf::hotspot {
namespace {

// The next space-separated field of text.
std::string_view take_field(std::string_view& text)
{
  size_t space = text.find(' ');
  std::string_view field = text.substr(0, space);
  text.remove_prefix(space == std::string_view::npos ? text.size() : space + 1);
  return field;
}

std::optional<uint64_t> take_hex(std::string_view& text)
{
  return text::parse_number<uint64_t>(take_field(text), 16);
}

std::optional<JvmRecord> parse_code(std::string_view rest)
{
  JvmRecord record;
  record.kind = JvmRecord::Kind::kCode;
  JvmCode& code = record.code;
  auto start = take_hex(rest);
  auto size = take_hex(rest);
  auto frame_words = text::parse_number<uint32_t>(take_field(rest));
  auto complete = text::parse_number<int64_t>(take_field(rest));
  std::string_view form = take_field(rest);
  auto first_end = take_hex(rest);
  auto second_end = take_hex(rest);
  if (!start || !size || !frame_words || !complete || !first_end || !second_end || !rest.empty() ||
      *size == 0 || *start + *size < *start || *complete < -1 ||
      *complete > static_cast<int64_t>(*size))
    return std::nullopt;
  code.start = *start;
  code.size = *size;
  code.frame_words = *frame_words;
  code.frame_complete = *complete;
  if (form == "push")
    code.prologue = PrologueForm::kPush;
  else if (form == "save")
    code.prologue = PrologueForm::kSave;
  else if (form != "none")
    return std::nullopt;
  if (code.prologue != PrologueForm::kUnknown) {
    if (*first_end == 0 || *first_end >= *second_end || *second_end > *size)
      return std::nullopt;
    code.first_end = static_cast<uint32_t>(*first_end);
    code.second_end = static_cast<uint32_t>(*second_end);
  }
  return record;
}

} // namespace

std::optional<JvmRecord> parse_jvm_record_line(std::string_view line)
{
  std::string_view rest = line;
  std::string_view kind = take_field(rest);
  JvmRecord record;
  if (kind == "flamebpf-unwind") {
    if (rest != "1")
      return std::nullopt;
    record.kind = JvmRecord::Kind::kHeader;
    return record;
  }
  if (kind == "code")
    return parse_code(rest);
  if (kind == "interpreter") {
    auto start = take_hex(rest);
    auto size = take_hex(rest);
    if (!start || !size || !rest.empty() || *size == 0 || *start + *size < *start)
      return std::nullopt;
    record.kind = JvmRecord::Kind::kInterpreter;
    record.code.start = *start;
    record.code.size = *size;
    return record;
  }
  if (kind == "unload") {
    auto start = take_hex(rest);
    if (!start || !rest.empty())
      return std::nullopt;
    record.kind = JvmRecord::Kind::kUnload;
    record.code.start = *start;
    return record;
  }
  if (kind == "method") {
    auto method = take_hex(rest);
    if (!method || *method == 0 || rest.empty())
      return std::nullopt;
    record.kind = JvmRecord::Kind::kMethod;
    record.method = *method;
    record.name = rest;
    return record;
  }
  return std::nullopt;
}

bool JvmRecords::apply(const JvmRecord& record)
{
  switch (record.kind) {
  case JvmRecord::Kind::kHeader:
    return true;
  case JvmRecord::Kind::kCode: {
    const JvmCode& code = record.code;
    uint64_t end = code.start + code.size;
    // Whatever the new code overlaps was freed: the new code replaces it.
    auto it = code_.lower_bound(code.start);
    if (it != code_.begin() &&
        std::prev(it)->second.start + std::prev(it)->second.size > code.start)
      --it;
    while (it != code_.end() && it->first < end) {
      ++overlaps_;
      it = code_.erase(it);
      charge_.shrink(kCodeBytes);
    }
    if (code_.size() >= kMaxCode || !charge_.grow(kCodeBytes))
      return false;
    code_[code.start] = code;
    ++generation_;
    return true;
  }
  case JvmRecord::Kind::kInterpreter: {
    // A JVM has one interpreter, generated at its start: the agent's first record of it holds,
    // and a later one that says otherwise is not believed.
    std::pair range{record.code.start, record.code.start + record.code.size};
    if (interpreter_)
      return *interpreter_ == range;
    interpreter_ = range;
    ++generation_;
    return true;
  }
  case JvmRecord::Kind::kUnload:
    if (code_.erase(record.code.start)) {
      charge_.shrink(kCodeBytes);
      ++generation_;
    }
    return true;
  case JvmRecord::Kind::kMethod: {
    if (method_lows_.size() + pending_lines_.size() >= kMaxMethods ||
        record.line_offset > kMaxMethodLineOffset || !charge_.grow(kMethodBytes))
      return false;
    pending_lines_.push_back({record.method, record.line_offset});
    // Settled as they come too, so that a JVM whose methods no frame asks for holds them compact.
    if (pending_lines_.size() >= std::max<size_t>(4096, method_lows_.size()))
      settle_method_lines();
    // A name read from an earlier line of the method no longer holds.
    if (auto named = names_.find(record.method); named != names_.end()) {
      method_name_bytes_ -= named->second.size();
      charge_.shrink(kNameBytes + named->second.size());
      names_.erase(named);
    }
    return true;
  }
  }
  return false;
}

void JvmRecords::settle_method_lines() const
{
  if (pending_lines_.empty())
    return;
  auto by_method_then_offset = [](const MethodLine& a, const MethodLine& b) {
    return a.method != b.method ? a.method < b.method : a.offset < b.offset;
  };
  std::vector<MethodLine> settled_lines;
  settled_lines.reserve(method_lows_.size());
  for (size_t span = 0; span < method_spans_.size(); ++span) {
    size_t end =
        span + 1 < method_spans_.size() ? method_spans_[span + 1].second : method_lows_.size();
    for (size_t i = method_spans_[span].second; i < end; ++i)
      settled_lines.push_back(
          {uint64_t{method_spans_[span].first} << 32 | method_lows_[i], method_offsets_[i]});
  }
  size_t settled = settled_lines.size();
  std::sort(pending_lines_.begin(), pending_lines_.end(), by_method_then_offset);
  // One file's lines are applied in the order they stand in it (a file read again starts the
  // records over): of one method's lines, the one furthest in holds.
  std::vector<MethodLine> lines(settled + pending_lines_.size());
  std::merge(settled_lines.begin(), settled_lines.end(), pending_lines_.begin(),
             pending_lines_.end(), lines.begin(), by_method_then_offset);
  settled_lines = {};
  size_t held_before = settled * kSettledMethodBytes + pending_lines_.size() * kMethodBytes;
  method_spans_.clear();
  method_lows_.clear();
  method_offsets_.clear();
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i + 1 < lines.size() && lines[i + 1].method == lines[i].method)
      continue;
    auto high = static_cast<uint32_t>(lines[i].method >> 32);
    if (method_spans_.empty() || method_spans_.back().first != high)
      method_spans_.emplace_back(high, static_cast<uint32_t>(method_lows_.size()));
    method_lows_.push_back(static_cast<uint32_t>(lines[i].method));
    method_offsets_.push_back(static_cast<uint32_t>(lines[i].offset));
  }
  method_spans_.shrink_to_fit();
  method_lows_.shrink_to_fit();
  method_offsets_.shrink_to_fit();
  pending_lines_.clear();
  if (pending_lines_.capacity() > 4096)
    pending_lines_.shrink_to_fit();
  // What settling saved, the lines a later one replaced among it, goes back to the share.
  charge_.shrink(held_before - method_lows_.size() * kSettledMethodBytes);
}

std::optional<uint64_t> JvmRecords::method_line(uint64_t method) const
{
  settle_method_lines();
  auto high = static_cast<uint32_t>(method >> 32);
  auto span = std::lower_bound(method_spans_.begin(), method_spans_.end(), high,
                               [](const std::pair<uint32_t, uint32_t>& entry, uint32_t wanted) {
                                 return entry.first < wanted;
                               });
  if (span == method_spans_.end() || span->first != high)
    return std::nullopt;
  auto begin = method_lows_.begin() + span->second;
  auto end = std::next(span) == method_spans_.end()
                 ? method_lows_.end()
                 : method_lows_.begin() + std::next(span)->second;
  auto it = std::lower_bound(begin, end, static_cast<uint32_t>(method));
  if (it == end || *it != static_cast<uint32_t>(method))
    return std::nullopt;
  return method_offsets_[static_cast<size_t>(it - method_lows_.begin())];
}

bool JvmRecords::keep_method_name(uint64_t method, std::string_view name)
{
  name = name.substr(0, kMaxMethodName);
  if (names_.contains(method))
    return true;
  if (method_name_bytes_ + name.size() > kMaxMethodNameBytes ||
      !charge_.grow(kNameBytes + name.size()))
    return false;
  names_.emplace(method, name);
  method_name_bytes_ += name.size();
  return true;
}

std::optional<std::string_view> JvmRecords::method_name(uint64_t method) const
{
  auto it = names_.find(method);
  if (it == names_.end() || it->second.empty())
    return std::nullopt;
  return std::string_view(it->second);
}

void JvmRecords::clear()
{
  code_.clear();
  interpreter_.reset();
  method_spans_.clear();
  method_lows_.clear();
  method_offsets_.clear();
  pending_lines_.clear();
  names_.clear();
  method_name_bytes_ = 0;
  charge_.reset();
  ++generation_;
}

JvmRecordsReader::JvmRecordsReader(uint32_t host_pid,
                                   uint32_t ns_pid,
                                   std::string proc_root,
                                   std::shared_ptr<MemoryShare> share)
    : AppendedLinesReader(host_pid,
                          std::move(proc_root),
                          "/tmp/flamebpf-" + std::to_string(ns_pid) + ".unwind",
                          {kMaxLine, kMaxReadPerInterval, kMaxReadPerInterval},
                          "its Java frames unwind by frame pointers")
{
  records_.charge_to(std::move(share));
}

void JvmRecordsReader::report()
{
  if (bad_lines() > 0 && !bad_lines_reported_) {
    spdlog::warn("{}: {} malformed unwind records skipped; the code they describe unwinds by "
                 "frame pointers",
                 file_.path(), bad_lines());
    bad_lines_reported_ = true;
  }
  if (ignored_records_ > 0 && !ignored_reported_) {
    spdlog::warn("{}: more code or method names than flamebpf keeps for one JVM; {} records "
                 "ignored",
                 file_.path(), ignored_records_);
    ignored_reported_ = true;
  }
}

void JvmRecordsReader::take_line(std::string_view line, uint64_t offset)
{
  auto record = parse_jvm_record_line(line);
  if (!record) {
    ++bad_lines_;
    return;
  }
  record->line_offset = offset;
  if (!records_.apply(*record))
    ++ignored_records_;
}

void JvmRecordsReader::read_method_name(uint64_t method)
{
  if (records_.method_name_read(method))
    return;
  auto offset = records_.method_line(method);
  if (!offset)
    return;
  // The file is the target's: the line there now must still be a record of this method.
  auto line = file_.line_at(*offset);
  auto record = line ? parse_jvm_record_line(*line) : std::nullopt;
  bool names_it = record && record->kind == JvmRecord::Kind::kMethod && record->method == method;
  if (!records_.keep_method_name(method, names_it ? record->name : std::string_view()))
    ++ignored_records_;
}

} // namespace flamebpf::hotspot
