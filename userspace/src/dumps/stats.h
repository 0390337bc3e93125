// Agent mode's record of each interval: one JSON line appended to DIR/flamebpf-stats.jsonl
// (samples per target, each target's coverage, drops by kind, unnamed frames, JIT perf maps' age,
// flamebpf's own CPU time and memory) and one summary line for the log.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/memory_account.h"
#include "dumps/dump_files.h"
#include "profile/coverage.h"
#include "profile/symbolized_profile.h"

namespace flamebpf::dumps {

// flamebpf's own use of the machine.
struct OwnUsage {
  double cpu_seconds = 0;      // user + system since start
  uint64_t rss_bytes = 0;      // resident memory now
  uint64_t rss_anon_bytes = 0; // of which anonymous (heap, stacks): what a leak would grow
  size_t open_fds = 0;         // file descriptors open now
};

// What flamebpf keeps between intervals; flat over a long run unless something leaks.
struct Occupancy {
  size_t known_images = 0;   // BPF map of announced process images
  size_t cgroup_targets = 0; // BPF cgroup filter
  size_t pid_targets = 0;    // BPF pid filter
  size_t processes = 0;      // processes the symbolizer remembers
  size_t elf_files = 0;      // ELF files it holds open
  size_t symbol_bytes = 0;   // what their symbols and inline indexes take, roughly
  size_t symbol_tables = 0;  // the symbol tables they share (copies of a file share one)
};

// Reads this process's CPU time and resident memory.
OwnUsage own_usage();

// A JIT's perf map, by process, with the target the process belongs to.
struct PerfMapAge {
  uint32_t pid = 0;
  std::string target;
  double age_seconds = 0; // since the JIT last wrote it
};

struct IntervalStats {
  Window window;
  const profile::SymbolizedProfile* profile = nullptr; // the interval's samples
  std::vector<PerfMapAge> perf_maps;
  std::vector<profile::TargetCoverage> coverage; // of the targets followed for the whole interval
  OwnUsage usage;
  Occupancy occupancy;
  // What flamebpf's memory account holds by kind (common/memory_account.h): the targets' charges
  // and flamebpf's own measured beside them. The kernel maps are not in it.
  MemoryBreakdown memory;
  double interval_cpu_seconds = 0; // flamebpf's CPU time over the interval
  size_t files_written = 0;
  size_t dumps_pending = 0;
};

// The drop counters (FB_COUNTER_*) by the names the stats file and the metrics give them.
const std::vector<std::pair<int, const char*>>& drop_kinds();

// The interval's JSON object, on one line without its newline.
std::string stats_json(const IntervalStats& stats);

// "interval 16:20:00–16:21:00: 5940 samples in 3 targets, 0 drops, unnamed frames: native 1.2%,
// JIT 0.0%; coverage web 98%, db 62% (naming), cache 99%; flamebpf CPU 0.03 s, RSS 28 MB, memory
// 12.4 MiB (symbols 10.1, inlines 2.2, unwind_tables 0.1)": the kinds that hold 0.1 MiB or more.
std::string summary_line(const IntervalStats& stats);

// s as a JSON string literal, quotes included. JSON is UTF-8 text and s any bytes: each byte
// that starts no valid UTF-8 sequence is replaced by U+FFFD (written "\ufffd"), and control
// characters are escaped.
std::string json_string(std::string_view s);

} // namespace flamebpf::dumps
