// What consumes the profile of each interval of a recording: the profile files written at its end
// (ProfileFileSink); agent mode's periodic dumps (DumpSink), its statistics (StatsSink) and its
// HTTP server (ServeSink); top's screen (TopSink). The recorder feeds a list of them, built from
// the options (pipeline/sinks.h), and its loop is the same whichever they are.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "dumps/dump_files.h"
#include "dumps/dump_writer.h"
#include "dumps/stats.h"
#include "profile/coverage.h"
#include "profile/symbolized_profile.h"
#include "target/target_set.h"

namespace flamebpf::pipeline {

// One file written.
struct OutputFile {
  std::string path;       // "-" for stdout
  uint64_t samples = 0;   // samples in it
  uint64_t processes = 0; // distinct processes in it
};

// What a recording did, for its last log line: each sink fills in its part.
struct RecordSummary {
  std::vector<OutputFile> outputs; // one per target when the profile is split
  std::string output_dir;          // agent mode: where the dumps went
  uint64_t intervals = 0;          // agent mode: intervals dumped
  uint64_t dump_files = 0;         // agent mode: files written
  uint64_t samples = 0;            // samples in the profile
  uint64_t processes = 0;          // distinct processes in the profile
  uint64_t targets = 0;            // targets profiled at some point
  uint64_t drops = 0;              // samples whose stack (or count) was lost
  double seconds = 0;              // time sampled
};

// A JIT's perf map as last read.
struct PerfMapFact {
  uint32_t pid = 0;
  std::chrono::system_clock::time_point modified; // when the JIT last wrote it
};

// What is known of an interval besides its profile: plain data, taken from the stages by the
// recorder when the interval ends. Sinks see it in their list's order, and a sink may add what it
// did for those after it (the dumps it wrote, the statistics it computed).
struct IntervalFacts {
  dumps::Window window; // by the wall clock
  // The kernel maps' and the symbolizer's occupancy at the interval's end.
  dumps::Occupancy occupancy;
  std::vector<PerfMapFact> perf_maps;
  // Each target's samples against the CPU time it used over the interval, for the targets
  // followed for all of it (profile/coverage.h).
  std::vector<profile::TargetCoverage> coverage;
  // Added by DumpSink: the dumps written (and pending) for this interval.
  std::optional<dumps::DumpReport> dumps;
  // Added by StatsSink: the interval's statistics, whose profile pointer is the interval's.
  std::optional<dumps::IntervalStats> stats;
};

class IntervalSink {
public:
  virtual ~IntervalSink() = default;

  // The length of the intervals consumed, which end at wall-clock multiples of it; none: one
  // interval, the whole recording.
  virtual std::optional<std::chrono::nanoseconds> interval() const = 0;

  // Targets that joined the recording: those resolved at its start, then those added later.
  virtual void targets_added(const std::vector<target::Target>& added) = 0;

  // Targets that left the recording (a container that stopped, a process that exited).
  virtual void targets_removed(const std::vector<target::Target>& removed) { (void)removed; }

  // The stages run: the first interval starts now.
  virtual void started() {}

  // One drain's profile, as it joins the interval's: for what shows the profile as it is sampled.
  virtual void drained(const profile::SymbolizedProfile& part) { (void)part; }

  // When the sink wants the kernel's maps drained next, if sooner than the schedule has it.
  virtual std::optional<std::chrono::steady_clock::time_point> drain_wanted_by() const
  {
    return std::nullopt;
  }

  // The profile of one interval, which ended at facts.window.end. A failure ends the recording.
  [[nodiscard]] virtual Result<> consume(const profile::SymbolizedProfile& interval,
                                         IntervalFacts& facts) = 0;

  // After the last interval: writes what is left, and fills in summary's part of the sink.
  [[nodiscard]] virtual Result<> finish(RecordSummary& summary) = 0;
};

} // namespace flamebpf::pipeline
