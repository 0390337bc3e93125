// Recording mode's output: the whole recording is one interval, written at its end to -o FILE
// (or the default folded file and its flame graph beside it), one file per target when there are
// several, each in the format its name says.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cli/options.h"
#include "pipeline/interval_sink.h"

namespace flamebpf::pipeline {

class ProfileFileSink final : public IntervalSink {
public:
  // The sink of config's outputs; per_target splits them by target. A FIFO or a missing
  // directory where one file goes is a usage error now, not after the recording.
  [[nodiscard]] static Result<std::unique_ptr<ProfileFileSink>> open(const cli::Config& config,
                                                                     bool per_target);

  std::optional<std::chrono::nanoseconds> interval() const override { return std::nullopt; }
  // Remembers the targets' names: a requested target without samples still gets its (empty)
  // file, since "no CPU used" is an answer.
  void targets_added(const std::vector<target::Target>& added) override;
  // Writes the files of the recording's profile.
  Result<> consume(const profile::SymbolizedProfile& interval, IntervalFacts& facts) override;
  Result<> finish(RecordSummary& summary) override;

private:
  ProfileFileSink(const cli::Config& config, std::vector<std::string> outputs, bool per_target);

  emit::SvgOptions graph_;           // with target_frame as -o asked
  std::vector<std::string> outputs_; // the paths given (before they are split by target)
  bool per_target_;
  std::set<std::string> target_names_;
  RecordSummary summary_; // what consume() wrote
};

} // namespace flamebpf::pipeline
