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
    std::string_view name = record.name.substr(0, kMaxMethodName);
    auto [it, inserted] = methods_.try_emplace(record.method);
    size_t old_bytes = inserted ? 0 : it->second.size();
    // What the method is charged now and would be: its node and its name.
    uint64_t before = inserted ? 0 : kMethodBytes + old_bytes;
    uint64_t after = kMethodBytes + name.size();
    bool fits = method_name_bytes_ - old_bytes + name.size() <= kMaxMethodNameBytes &&
                (after <= before || charge_.grow(after - before));
    if (!fits) {
      if (inserted)
        methods_.erase(it);
      return false;
    }
    if (after < before)
      charge_.shrink(before - after);
    method_name_bytes_ = method_name_bytes_ - old_bytes + name.size();
    it->second.assign(name);
    return true;
  }
  }
  return false;
}

std::optional<std::string_view> JvmRecords::method_name(uint64_t method) const
{
  auto it = methods_.find(method);
  if (it == methods_.end())
    return std::nullopt;
  return std::string_view(it->second);
}

void JvmRecords::clear()
{
  code_.clear();
  interpreter_.reset();
  methods_.clear();
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

void JvmRecordsReader::take_line(std::string_view line)
{
  auto record = parse_jvm_record_line(line);
  if (!record)
    ++bad_lines_;
  else if (!records_.apply(*record))
    ++ignored_records_;
}

} // namespace flamebpf::hotspot
