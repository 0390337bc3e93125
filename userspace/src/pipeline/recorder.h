// Recording mode: sample until the duration ends or a signal arrives, draining and symbolizing
// every interval and following the targets as they come and go, then write the profile (one
// file per target when there are several). Wires the stages; holds no stage logic itself.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "cli/options.h"
#include "common/result.h"

namespace flamebpf::pipeline {

// One file written.
struct OutputFile {
  std::string path;       // "-" for stdout
  uint64_t samples = 0;   // samples in it
  uint64_t processes = 0; // distinct processes in it
};

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

// Set by the SIGINT/SIGTERM handler; the recorder stops at the next poll.
extern std::atomic<bool> g_stop_requested;
// Set by the SIGHUP handler; the recorder resolves its targets again.
extern std::atomic<bool> g_reresolve_requested;

// Resolves targets and fails with a usage error if one is unknown; otherwise runs to the end and
// writes the output.
[[nodiscard]] Result<RecordSummary> record(const cli::Config& config);

} // namespace flamebpf::pipeline
