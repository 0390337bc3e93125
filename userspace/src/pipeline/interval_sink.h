// What consumes the profile of each interval of a recording: the profile files written at its end
// (ProfileFileSink), agent mode's periodic dumps (DumpSink), and what else shows a profile as it
// grows. The recorder's loop is the same whichever it feeds.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "dumps/dump_files.h"
#include "profile/symbolized_profile.h"
#include "sampler/sampler.h"
#include "symbolize/symbolizer.h"
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

// An interval as a sink sees it: when it was, and the stages that recorded it, for what they can
// tell about themselves.
struct IntervalContext {
  dumps::Window window; // by the wall clock
  const symbolize::Symbolizer& symbolizer;
  const sampler::Sampler& sampler;
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

  // The profile of one interval, which ended at context.window.end. A failure ends the recording.
  [[nodiscard]] virtual Result<> consume(const profile::SymbolizedProfile& interval,
                                         const IntervalContext& context) = 0;

  // After the last interval: writes what is left, and fills in summary's part of the sink.
  [[nodiscard]] virtual Result<> finish(RecordSummary& summary) = 0;
};

} // namespace flamebpf::pipeline
