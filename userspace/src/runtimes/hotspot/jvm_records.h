// The unwind records that flamebpf's JVM agent writes to /tmp/flamebpf-<pid>.unwind (the format
// is jvm-agent/src/unwind_records.h): where a JVM's compiled code and stubs are, their frame
// sizes and prologues, the interpreter's range, and the names of the methods that interpreter
// frames hold. The file sits in the container's /tmp and is not trusted: it is read through the
// process's root, only if the process's user or root owns it, and with budgets as perf maps are
// (symbolize/perf_map.h):
//   per line     JvmRecordsReader::kMaxLine bytes; longer lines are skipped and counted
//   per file     JvmRecords::kMaxCode code records and kMaxMethodNameBytes of method names;
//                beyond them, records are ignored and counted
//   per interval kMaxReadPerInterval bytes read; the rest waits for the next interval
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/appended_lines.h"
#include "common/memory_account.h"

namespace flamebpf::hotspot {

// How a piece of code builds its frame (the agent's prologue.h).
enum class PrologueForm : uint8_t {
  kUnknown, // not found or not agreeing with the frame size: only safe rules apply
  kPush,    // push %rbp ends at first_end, sub $imm,%rsp at second_end
  kSave,    // sub $imm,%rsp ends at first_end, mov %rbp,disp(%rsp) at second_end
};

// A compiled method or stub at [start, start + size).
struct JvmCode {
  uint64_t start = 0;
  uint64_t size = 0;
  uint32_t frame_words = 0;    // 0: no frame of its own
  int64_t frame_complete = -1; // bytes from start; -1: unknown
  PrologueForm prologue = PrologueForm::kUnknown;
  uint32_t first_end = 0;  // bytes from start
  uint32_t second_end = 0; // bytes from start
};

// One parsed line.
struct JvmRecord {
  enum class Kind : uint8_t { kHeader, kCode, kInterpreter, kUnload, kMethod };
  Kind kind = Kind::kHeader;
  JvmCode code;             // kCode; kInterpreter uses start and size; kUnload start
  uint64_t method = 0;      // kMethod: the Method*
  std::string_view name;    // kMethod: its name, a view into the line
  uint64_t line_offset = 0; // kMethod: where the line begins in its file, set by its reader
};

// Parses one line (without its newline); nullopt if it is no valid record: an unknown kind, a
// bad number, an empty or wrapping range, prologue ends outside the code or out of order.
std::optional<JvmRecord> parse_jvm_record_line(std::string_view line);

// What a JVM's records say now, after applying them in order: later code at an address replaces
// what it overlaps (the JVM reuses freed code space, and may report the unload later).
class JvmRecords {
public:
  // What the records hold from now on is charged to share; call it while they are empty.
  void charge_to(std::shared_ptr<MemoryShare> share)
  {
    charge_ = MemoryCharge(std::move(share), MemoryKind::kJvmRecords);
  }
  // Applies one record. Returns false if it was ignored for a budget (its own or the share's).
  bool apply(const JvmRecord& record);

  // Code by start address; never overlapping.
  const std::map<uint64_t, JvmCode>& code() const { return code_; }
  // The interpreter's range, if the agent said: its first record of it.
  std::optional<std::pair<uint64_t, uint64_t>> interpreter() const { return interpreter_; }
  // Where the agent's line naming method begins in the file, if it named it. A JVM names every
  // method of every class it loads (some ten thousand at the least), and samples hold few of
  // them: what is kept of a method is where its line is, and its name only once a frame needs it
  // (JvmRecordsReader::read_method_name).
  std::optional<uint64_t> method_line(uint64_t method) const;
  // The name of an interpreted frame's Method*, if it was read (keep_method_name).
  std::optional<std::string_view> method_name(uint64_t method) const;
  // Whether method's name was read, named or not, since its line was last applied.
  bool method_name_read(uint64_t method) const { return names_.contains(method); }
  // Keeps method's name as read again from its line, cut to kMaxMethodName; an empty name says
  // its line named nothing when read (the file changed). False if the budgets refuse it.
  bool keep_method_name(uint64_t method, std::string_view name);
  // Bumped whenever the code or the interpreter range change (not for method names).
  uint64_t generation() const { return generation_; }
  // Code records that replaced code they overlapped.
  uint64_t overlaps() const { return overlaps_; }
  void clear();

  static constexpr size_t kMaxCode = 512 * 1024;
  static constexpr size_t kMaxMethods = 4 << 20;
  static constexpr size_t kMaxMethodNameBytes = 64 << 20;
  static constexpr size_t kMaxMethodName = 4096; // longer names are cut
  // What a code record, a method's line and a name read cost besides the name, as charged to the
  // share: a node of the code's map, an entry of the lines' array (a line applied, then once
  // settled among the others), a node of the names' map.
  static constexpr size_t kCodeBytes = 96;
  static constexpr size_t kMethodBytes = 16;
  static constexpr size_t kSettledMethodBytes = 8;
  static constexpr size_t kNameBytes = 64;
  // A method line further into its file than this is not kept (its method stays unnamed).
  static constexpr uint64_t kMaxMethodLineOffset = UINT32_MAX;

private:
  struct MethodLine {
    uint64_t method;
    uint64_t offset;
  };
  // Sorts the lines applied since they were last settled in, the last line of a method holding.
  void settle_method_lines() const;

  std::map<uint64_t, JvmCode> code_;
  std::optional<std::pair<uint64_t, uint64_t>> interpreter_;
  // The settled lines, 8 bytes a method (a JVM names some ten thousand): sorted by method, the low
  // halves of the Method*s and their lines' offsets side by side, and for each high half (a JVM's
  // metadata lies in a few 4 GiB spans) where its methods begin.
  mutable std::vector<std::pair<uint32_t, uint32_t>> method_spans_; // high half, first index
  mutable std::vector<uint32_t> method_lows_;
  mutable std::vector<uint32_t> method_offsets_;
  // Applied since, in file order; lookups settle them, and so does apply() once they are many
  // (both on one thread).
  mutable std::vector<MethodLine> pending_lines_;
  std::unordered_map<uint64_t, std::string> names_; // read so far, "" if the line named nothing
  size_t method_name_bytes_ = 0;
  // kCodeBytes per code record, kMethodBytes per pending method line and kSettledMethodBytes per
  // settled one, kNameBytes and its name per name read
  mutable MemoryCharge charge_;
  uint64_t generation_ = 0;
  uint64_t overlaps_ = 0;
};

// Reads one JVM's records incrementally (common/appended_lines.h), as perf maps are read: each
// refresh() takes what was appended since the last, starting over if the file was replaced or
// shrank.
class JvmRecordsReader final : public AppendedLinesReader {
public:
  // host_pid names the process on the host; ns_pid, its pid in its own namespace, names the
  // file. proc_root is normally "/proc". What the records hold is charged to share (nothing is,
  // if null).
  JvmRecordsReader(uint32_t host_pid,
                   uint32_t ns_pid,
                   std::string proc_root = "/proc",
                   std::shared_ptr<MemoryShare> share = nullptr);

  const JvmRecords& records() const { return records_; }
  // Reads the name of method from its line again, once since the line was applied, and keeps it
  // in the records if the line still names that method; samples ask for few of them.
  void read_method_name(uint64_t method);
  // Lines skipped as malformed or too long; records ignored for a budget. The file says the rest.
  uint64_t bad_lines() const { return bad_lines_ + file_.overlong_lines(); }
  uint64_t ignored_records() const { return ignored_records_; }

  static constexpr size_t kMaxLine = 8 * 1024;
  static constexpr size_t kMaxReadPerInterval = 32 << 20;

private:
  void start_over() override { records_.clear(); }
  void take_line(std::string_view line, uint64_t offset) override;
  void report() override;

  JvmRecords records_;
  uint64_t bad_lines_ = 0; // malformed; overlong ones are the file's
  uint64_t ignored_records_ = 0;
  bool bad_lines_reported_ = false;
  bool ignored_reported_ = false;
};

} // namespace flamebpf::hotspot
