// Agent mode's statistics: every interval, a line about the interval and flamebpf itself
// (dumps/stats.h), logged and appended to DIR/flamebpf-stats.jsonl beside the dumps. A stats file
// that cannot be written is said once, never fatal.
#pragma once

#include <memory>
#include <string>

#include "dumps/dump_writer.h"
#include "dumps/stats.h"
#include "pipeline/interval_sink.h"

namespace flamebpf::pipeline {

class StatsSink final : public IntervalSink {
public:
  // Appends to the directory writer writes the dumps into; intervals of the given length; the
  // memory breakdown is memory's (none, if null), read after the dumps of the interval.
  StatsSink(std::shared_ptr<dumps::DumpWriter> writer,
            std::chrono::nanoseconds interval,
            std::shared_ptr<const MemoryAccount> memory = nullptr);

  std::optional<std::chrono::nanoseconds> interval() const override { return interval_; }
  void targets_added(const std::vector<target::Target>& added) override { (void)added; }
  void started() override;
  // Computes the interval's statistics (with the dumps facts name, if any), and adds them to
  // facts; never fails.
  Result<> consume(const profile::SymbolizedProfile& interval, IntervalFacts& facts) override;
  Result<> finish(RecordSummary& summary) override
  {
    (void)summary;
    return {};
  }

private:
  std::shared_ptr<dumps::DumpWriter> writer_;
  std::chrono::nanoseconds interval_;
  std::shared_ptr<const MemoryAccount> memory_;
  dumps::OwnUsage usage_before_; // at the start of the interval
  std::string stats_failure_;    // the last failure to append to the stats file, said once
};

} // namespace flamebpf::pipeline
