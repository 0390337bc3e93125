// Agent mode's dumps: every interval, those of each target with samples (dumps::DumpWriter). A
// failure to write is logged, never fatal: sampling goes on and the writes are retried at the next
// interval.
#pragma once

#include <memory>

#include "cli/options.h"
#include "dumps/dump_writer.h"
#include "pipeline/interval_sink.h"

namespace flamebpf::pipeline {

class DumpSink final : public IntervalSink {
public:
  // Opens config.output_dir (dumps::DumpWriter::open); fails with what to fix if it cannot. The
  // dumps pending are measured in memory (nothing is, if null).
  [[nodiscard]] static Result<std::unique_ptr<DumpSink>>
  open(const cli::Config& config, const std::shared_ptr<MemoryAccount>& memory = nullptr);

  std::optional<std::chrono::nanoseconds> interval() const override { return interval_; }
  // Only counts them: agent mode sees containers come and go for weeks.
  void targets_added(const std::vector<target::Target>& added) override;
  // Writes the interval's dumps and adds what it wrote to facts; never fails.
  Result<> consume(const profile::SymbolizedProfile& interval, IntervalFacts& facts) override;
  // Writes the dumps still pending.
  Result<> finish(RecordSummary& summary) override;

  // The writer, whose directory holds the statistics file too (StatsSink).
  std::shared_ptr<dumps::DumpWriter> writer() const { return writer_; }

private:
  DumpSink(std::shared_ptr<dumps::DumpWriter> writer, std::chrono::nanoseconds interval);

  std::shared_ptr<dumps::DumpWriter> writer_;
  std::chrono::nanoseconds interval_;
  uint64_t intervals_ = 0;
  uint64_t files_ = 0;
  uint64_t targets_ = 0;
};

} // namespace flamebpf::pipeline
