// Recording mode: sample until the duration ends or a signal arrives, draining and symbolizing
// every interval, then write one profile. Wires the stages; holds no stage logic itself.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "cli/options.h"
#include "common/result.h"

namespace flamebpf::pipeline {

struct RecordSummary {
  std::string output_path; // where the profile went ("-" for stdout)
  uint64_t samples = 0;    // samples in the profile
  uint64_t processes = 0;  // distinct processes in the profile
  uint64_t targets = 0;    // --pid and --cgroup targets
  uint64_t drops = 0;      // samples whose stack (or count) was lost
  double seconds = 0;      // time sampled
};

// Set by the SIGINT/SIGTERM handler; the recorder stops at the next poll.
extern std::atomic<bool> g_stop_requested;

// Resolves targets and fails with a usage error if one is unknown; otherwise runs to the end and
// writes the output.
[[nodiscard]] Result<RecordSummary> record(const cli::Config& config);

// ./flamebpf-<UTC time>.folded for a recording that starts now.
std::string default_output_path();

} // namespace flamebpf::pipeline
