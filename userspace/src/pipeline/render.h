// The `render`, `diff` and `merge` commands: folded files in, a flame graph (or folded text) out.
// No BPF, no root needed.
#pragma once

#include "cli/options.h"
#include "common/result.h"

namespace flamebpf::pipeline {

// Sums the folded inputs and writes config.output in the format its name says (pipeline/outputs).
[[nodiscard]] Result<> render(const cli::Config& config);

// Writes the differential flame graph of config.diff_before and config.diff_after: SVG for
// ".svg", else difffolded's "stack before after" form; a pprof name (".pb.gz") is a usage error.
[[nodiscard]] Result<> diff(const cli::Config& config);

// Sums the folded dumps in config.merge_dir whose windows lie within config.merge_from and
// config.merge_to, and writes config.output in the format its extension names.
[[nodiscard]] Result<> merge(const cli::Config& config);

} // namespace flamebpf::pipeline
