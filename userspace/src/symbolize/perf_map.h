// /tmp/perf-<pid>.map files, where JITs (Java through flamebpf's agent, perf-map-agent or
// `jcmd Compiler.perfmap`; Node.js and others) name the code they generate: one line
// "<hex start> <hex size> <name>" per piece of code, later lines winning where ranges overlap.
// A map is read through the process's own root: it sits in the container's /tmp, and the
// container is not trusted. As perf does, a map is believed only if the process's user or root
// owns it.
//
// What a map may cost has budgets that no real JIT meets; where one cuts, the cut is counted and
// shows as "[truncated]" (name_cut.h):
//   per name     kMaxPerfMapName bytes of a line's name (a Java method with its signature takes
//                ~100 bytes, and flamebpf's agent joins at most MaxInlineLevel + 1 = 16 of them
//                into an inline chain); a line longer than PerfMapReader::kMaxLine is skipped.
//   per map      PerfMapReader::kMaxEntries ranges and PerfMapTable::kMaxNameBytes of names
//                (a big Java service has ~100k pieces of code, named in ~100 bytes on average).
//   per process  PerfMapReader::kMaxParsePerInterval bytes of lines parsed and kMaxReadPerInterval
//                bytes read per interval, and one read from the start, however often the map is
//                polled, replaced or rewritten: the rest waits for the next interval.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/appended_lines.h"
#include "common/memory_account.h"

namespace flamebpf::symbolize {

struct PerfMapEntry {
  uint64_t start = 0;
  uint64_t end = 0; // exclusive
  std::string name;
  bool truncated = false; // the name was cut to a budget; it ends in kTruncated
};

// The bytes of a line's name kept; a longer name is cut (at an inline chain's separator where it
// has one) and ends in kTruncated.
inline constexpr size_t kMaxPerfMapName = 16 * 1024;

// Parses one line (without its newline); addresses with or without "0x". nullopt if malformed:
// a bad number, an empty range, one that wraps around, or no name. A name longer than max_name
// bytes is cut to max_name.
std::optional<PerfMapEntry> parse_perf_map_line(std::string_view line,
                                                size_t max_name = kMaxPerfMapName);

// Named ranges where a later insert wins over whatever it overlaps. The pieces of a range that a
// later one splits share its name, and the bytes of names held have a budget. A range may come
// with where its line is in the map rather than its name, which is kept once read (keep_name):
// a JIT names thousands of pieces of code, and samples hold few of them. Movable, not copyable: a
// copy would share names that each table counts as its own.
class PerfMapTable {
public:
  // A range as the table holds it; name is valid until the table changes.
  struct Entry {
    uint64_t start = 0;
    uint64_t end = 0; // exclusive
    std::string_view name;
    bool truncated = false; // a budget cut the name, or replaced it by kTruncated
    // Where the line naming the range begins in its map, and its length, while its name is not
    // read (name is empty then).
    std::optional<uint64_t> line;
    uint32_t line_bytes = 0;
  };

  // max_name_bytes bounds the bytes of names held (kMaxNameBytes unless a test says).
  explicit PerfMapTable(size_t max_name_bytes = kMaxNameBytes);
  PerfMapTable(PerfMapTable&&) = default;
  PerfMapTable& operator=(PerfMapTable&&) = default;
  PerfMapTable(const PerfMapTable&) = delete;
  PerfMapTable& operator=(const PerfMapTable&) = delete;

  // What the table holds from now on is charged to share (names and ranges); call it while the
  // table is empty.
  void charge_to(std::shared_ptr<MemoryShare> share)
  {
    charge_ = MemoryCharge(std::move(share), MemoryKind::kPerfMaps);
  }
  // Adds entry over whatever it overlaps (a range it splits keeps both outer parts). A name that
  // does not fit in the budget of name bytes, or that the share refuses, is held as kTruncated;
  // an entry whose range the share refuses is not added. Returns false in either case.
  bool insert(PerfMapEntry entry);
  // Adds [start, end) as insert() does, named by the line_bytes bytes at line in its map, which
  // are read when a frame needs them. Returns false if the share refuses the range.
  bool insert_line(uint64_t start, uint64_t end, uint64_t line, uint32_t line_bytes);
  // Keeps the name read from the line of the range that begins at start, if its name was not
  // read; an empty name says that its line names it no more (the range is then unnamed). Returns
  // false if the name was held as kTruncated for a budget.
  bool keep_name(uint64_t start, std::string name, bool truncated);
  // Names and ranges the share refused (as opposed to the table's own budget).
  uint64_t share_refusals() const { return share_refusals_; }
  // The entry covering address, if any and its line still names it.
  std::optional<Entry> find(uint64_t address) const;
  size_t size() const { return ranges_.size(); }
  // Bytes of the names held.
  size_t name_bytes() const { return name_bytes_; }
  void clear();

  // Enough for ~100k pieces of code named in ~300 bytes each, three times what a big Java service
  // holds.
  static constexpr size_t kMaxNameBytes = 32 << 20;
  // What a range and a name cost besides the name's text, as charged to the share: a node of the
  // map, and a name's shared block.
  static constexpr size_t kRangeBytes = 96;
  static constexpr size_t kNameBytes = 64;

private:
  struct Name {
    std::string text;
    bool truncated = false;
  };
  struct Range {
    uint64_t end = 0;
    std::shared_ptr<const Name> name; // shared by the pieces of a split range; null until read
    uint64_t line = 0;                // where the name is, until it is read
    uint32_t line_bytes = 0;
  };

  // The name held for text, or kTruncated if a budget refuses it (fitted is false then).
  std::shared_ptr<const Name> hold_name(std::string text, bool truncated, bool& fitted);
  // Puts range at start over whatever it overlaps; 2 * kRangeBytes are charged for it.
  void place(uint64_t start, Range range);
  // Forgets a range's name; its bytes are free once no range holds it.
  void release(const Range& range);

  size_t max_name_bytes_;
  std::map<uint64_t, Range> ranges_; // by start; never overlapping
  size_t name_bytes_ = 0;
  std::shared_ptr<const Name> over_budget_; // kTruncated, for names beyond the budget
  // Names (their text and kNameBytes each) and ranges (kRangeBytes each) held.
  MemoryCharge charge_;
  uint64_t share_refusals_ = 0;
};

// Reads one process's perf map incrementally (common/appended_lines.h): each refresh() takes what
// was appended since the last, starting over when the file was replaced (an atomic rewrite) or
// shrank, or was rewritten in place (as `jcmd Compiler.perfmap` does: truncated, then written
// whole; reread() says so). The file stays open, so the map of a process that exited can still
// be read to its end.
class PerfMapReader final : public AppendedLinesReader {
public:
  // host_pid names the process on the host; ns_pid is its pid inside its own pid namespace,
  // which names the map. proc_root is normally "/proc".
  // What the map's table holds is charged to share (nothing is, if null).
  PerfMapReader(uint32_t host_pid,
                uint32_t ns_pid,
                std::string proc_root = "/proc",
                std::shared_ptr<MemoryShare> share = nullptr);

  const PerfMapTable& table() const { return table_; }
  // Reads the name of the entry covering address from its line, if it was not read: the line
  // there now must still be a line whose range holds the entry's. Reads the file, as refresh().
  void read_name(uint64_t address);
  // Lines skipped as malformed or too long, since the reader was made.
  uint64_t bad_lines() const { return bad_lines_ + file_.overlong_lines(); }
  // Valid lines ignored because the table already held kMaxEntries ranges.
  uint64_t ignored_lines() const { return ignored_lines_; }
  // Names cut to kMaxPerfMapName, and names held as kTruncated because the map's names had used
  // up PerfMapTable::kMaxNameBytes.
  uint64_t long_names() const { return long_names_; }
  uint64_t names_over_budget() const { return names_over_budget_; }

  static constexpr size_t kMaxLine = 64 * 1024; // longer lines are skipped
  // Per interval, however many refreshes. Skipping an overlong line is cheap (no parsing), so it
  // has the larger budget; holes of a sparse file inside a skipped line cost nothing.
  static constexpr size_t kMaxParsePerInterval = 32 << 20;
  static constexpr size_t kMaxReadPerInterval = 256 << 20;
  // About 100 bytes each besides their names. A JIT with more live pieces of code than this is
  // far beyond any real runtime; its later lines are ignored.
  static constexpr size_t kMaxEntries = 256 * 1024;

private:
  void start_over() override { table_.clear(); }
  void take_line(std::string_view line, uint64_t offset) override;
  // Logs each kind of trouble the first time it happens.
  void report() override;

  PerfMapTable table_;
  uint64_t bad_lines_ = 0; // malformed; overlong ones are the file's
  uint64_t ignored_lines_ = 0;
  uint64_t long_names_ = 0;
  uint64_t names_over_budget_ = 0;
  uint64_t bad_lines_reported_ = 0;
  bool full_reported_ = false;
  bool long_names_reported_ = false;
  bool names_over_budget_reported_ = false;
};

} // namespace flamebpf::symbolize
