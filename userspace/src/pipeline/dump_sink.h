// Agent mode's output: every interval, the dumps of each target with samples (dumps::DumpWriter)
// and a line of statistics about the interval and flamebpf itself (dumps/stats.h), appended to
// DIR/flamebpf-stats.jsonl and logged. A failure to write is logged, never fatal: sampling goes
// on and the writes are retried at the next interval. With --listen, it serves the dumps and the
// statistics over HTTP too (serve/profile_routes.h), on the server's threads.
#pragma once

#include <memory>
#include <string>

#include "cli/options.h"
#include "dumps/dump_writer.h"
#include "dumps/metrics.h"
#include "dumps/stats.h"
#include "pipeline/interval_sink.h"
#include "serve/http_server.h"
#include "serve/live_profiles.h"

namespace flamebpf::pipeline {

class DumpSink final : public IntervalSink {
public:
  // Opens config.output_dir (dumps::DumpWriter::open), and starts listening with --listen; fails
  // with what to fix if either cannot be done.
  [[nodiscard]] static Result<std::unique_ptr<DumpSink>> open(const cli::Config& config);

  std::optional<std::chrono::nanoseconds> interval() const override { return interval_; }
  // Only counts them: agent mode sees containers come and go for weeks.
  void targets_added(const std::vector<target::Target>& added) override;
  void targets_removed(const std::vector<target::Target>& removed) override;
  void started() override;
  // Hands the drain to the live profiles that wait (with --listen).
  void drained(const profile::SymbolizedProfile& part) override;
  std::optional<std::chrono::steady_clock::time_point> drain_wanted_by() const override;
  // Writes the interval's dumps and statistics; never fails.
  Result<> consume(const profile::SymbolizedProfile& interval,
                   const IntervalContext& context) override;
  // Writes the dumps still pending.
  Result<> finish(RecordSummary& summary) override;

private:
  DumpSink(dumps::DumpWriter writer, std::chrono::nanoseconds interval);

  dumps::DumpWriter writer_;
  std::chrono::nanoseconds interval_;
  dumps::OwnUsage usage_before_; // at the start of the interval
  uint64_t intervals_ = 0;
  uint64_t files_ = 0;
  uint64_t targets_ = 0;
  std::string stats_failure_; // the last failure to append to the stats file, said once
  std::shared_ptr<dumps::Metrics> metrics_;   // with --listen
  std::shared_ptr<serve::LiveProfiles> live_; // with --listen
  std::unique_ptr<serve::HttpServer> server_; // with --listen
};

} // namespace flamebpf::pipeline
