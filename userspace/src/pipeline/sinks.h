// The interval sinks a recording feeds, built from its options, and what hands each event of the
// recording to every one of them in order.
#pragma once

#include <memory>
#include <vector>

#include "cli/options.h"
#include "common/memory_account.h"
#include "pipeline/interval_sink.h"
#include "target/target_set.h"

namespace flamebpf::pipeline {

class SinkList {
public:
  explicit SinkList(std::vector<std::unique_ptr<IntervalSink>> sinks) : sinks_(std::move(sinks)) {}

  // The sinks' interval (those that have one share it: the options give one); none if no sink
  // has one (a recording's profile files: one interval).
  std::optional<std::chrono::nanoseconds> interval() const;
  void targets_added(const std::vector<target::Target>& added);
  void targets_removed(const std::vector<target::Target>& removed);
  void started();
  void drained(const profile::SymbolizedProfile& part);
  // The soonest any sink wants a drain by.
  std::optional<std::chrono::steady_clock::time_point> drain_wanted_by() const;
  // Hands the interval to every sink in order; the first failure ends it.
  [[nodiscard]] Result<> consume(const profile::SymbolizedProfile& interval, IntervalFacts facts);
  // Finishes every sink, even after one failed; returns the first failure.
  [[nodiscard]] Result<> finish(RecordSummary& summary);

private:
  std::vector<std::unique_ptr<IntervalSink>> sinks_;
};

// The sinks config asks for: top's screen; or, with --output-dir, the dumps, their statistics and
// with --listen the server; else the recording's profile files (one per target with
// per-target output). Fails with what to fix if one cannot be opened. What the dumps pending and
// the answers being sent hold is measured in memory, whose breakdown the statistics give.
Result<SinkList> open_sinks(const cli::Config& config,
                            const target::TargetSet& targets,
                            const std::shared_ptr<MemoryAccount>& memory = nullptr);

} // namespace flamebpf::pipeline
