// /tmp/perf-<pid>.map files, where JITs (the JVM through flamebpf's agent, perf-map-agent or
// `jcmd Compiler.perfmap`; also Node.js and others) name the code they generate: one line
// "<hex start> <hex size> <name>" per piece of code, later lines winning where ranges overlap.
// A map is read through the process's own root: it sits in the container's /tmp, and the
// container is not trusted.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "common/unique_fd.h"

namespace flamebpf::symbolize {

struct PerfMapEntry {
  uint64_t start = 0;
  uint64_t end = 0; // exclusive
  std::string name;
};

// Parses one line (without its newline); addresses with or without "0x". nullopt if malformed:
// a bad number, an empty range, one that wraps around, or no name.
std::optional<PerfMapEntry> parse_perf_map_line(std::string_view line);

// Named ranges where a later insert wins over whatever it overlaps.
class PerfMapTable {
public:
  void insert(PerfMapEntry entry);
  // The entry covering address, if any.
  const PerfMapEntry* find(uint64_t address) const;
  size_t size() const { return entries_.size(); }
  void clear() { entries_.clear(); }

private:
  std::map<uint64_t, PerfMapEntry> entries_; // by start; never overlapping
};

// Reads one process's perf map incrementally: each refresh() takes what was appended since the
// last, starting over when the file was replaced (an atomic rewrite) or shrank. The file stays
// open, so the map of a process that exited can still be read to its end.
class PerfMapReader {
public:
  // host_pid names the process on the host; ns_pid is its pid inside its own pid namespace,
  // which names the map. proc_root is normally "/proc".
  PerfMapReader(uint32_t host_pid, uint32_t ns_pid, std::string proc_root = "/proc");

  // Reads what is new. Never blocks on the file; parses at most kMaxParsePerRefresh bytes of
  // lines and reads at most kMaxReadPerRefresh bytes in all (holes of a sparse file inside a
  // skipped line cost nothing).
  void refresh();

  const PerfMapTable& table() const { return table_; }
  // Lines skipped as malformed or too long, since the reader was made.
  uint64_t bad_lines() const { return bad_lines_; }
  // Valid lines ignored because the table already held kMaxEntries ranges.
  uint64_t ignored_lines() const { return ignored_lines_; }
  // Whether the map was found (now or earlier).
  bool found() const { return fd_.valid(); }
  // Where the map is, for messages: /proc/<pid>/root/tmp/perf-<ns_pid>.map.
  std::string path() const;
  // When the map file was last written; nullopt if it was never found.
  std::optional<std::chrono::system_clock::time_point> modified() const;

  static constexpr size_t kMaxLine = 64 * 1024; // longer lines are skipped
  // The rest waits for the next refresh. Skipping an overlong line is cheap (no parsing), so it
  // has the larger budget.
  static constexpr size_t kMaxParsePerRefresh = 32 << 20;
  static constexpr size_t kMaxReadPerRefresh = 256 << 20;
  // About 100 bytes each: a map of a process is at most ~25 MiB of memory. A JIT with more live
  // pieces of code than this is far beyond any real JVM; its later lines are ignored.
  static constexpr size_t kMaxEntries = 256 * 1024;

private:
  void start_over(UniqueFd fd, uint64_t device, uint64_t inode);
  // Takes the lines of text (the rest of a line waits in partial_); returns how many of its
  // bytes were parsed, as opposed to skipped as part of an overlong line.
  size_t take_lines(std::string_view text);

  uint32_t host_pid_;
  uint32_t ns_pid_;
  std::string proc_root_;
  UniqueFd fd_;
  uint64_t device_ = 0;
  uint64_t inode_ = 0;
  uint64_t offset_ = 0;   // bytes of the file consumed
  std::string partial_;   // an incomplete last line, waiting for its end
  bool skipping_ = false; // inside a line longer than kMaxLine
  PerfMapTable table_;
  uint64_t bad_lines_ = 0;
  uint64_t ignored_lines_ = 0;
};

} // namespace flamebpf::symbolize
