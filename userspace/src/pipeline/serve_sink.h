// --listen: serves the dumps, the statistics as Prometheus metrics and live profiles over HTTP
// (serve/profile_routes.h), on the server's threads. Each interval's statistics (StatsSink's, in
// the facts) feed the metrics; each drain feeds the live profiles that wait.
#pragma once

#include <memory>

#include "cli/options.h"
#include "dumps/metrics.h"
#include "pipeline/interval_sink.h"
#include "serve/http_server.h"
#include "serve/live_profiles.h"

namespace flamebpf::pipeline {

class ServeSink final : public IntervalSink {
public:
  // Starts listening on config.listen, answering from config.output_dir, for intervals of the
  // given length (the dumps'); fails with what to fix if it cannot (an address beyond this
  // machine without a token, a token file without one). Answers being sent are measured in
  // memory (nothing is, if null).
  [[nodiscard]] static Result<std::unique_ptr<ServeSink>>
  open(const cli::Config& config,
       std::chrono::nanoseconds interval,
       const std::shared_ptr<MemoryAccount>& memory = nullptr);

  std::optional<std::chrono::nanoseconds> interval() const override { return interval_; }
  void targets_added(const std::vector<target::Target>& added) override;
  void targets_removed(const std::vector<target::Target>& removed) override;
  // Hands the drain to the live profiles that wait.
  void drained(const profile::SymbolizedProfile& part) override;
  std::optional<std::chrono::steady_clock::time_point> drain_wanted_by() const override;
  // Adds the interval's statistics to the metrics; never fails.
  Result<> consume(const profile::SymbolizedProfile& interval, IntervalFacts& facts) override;
  // Answers the live profiles that wait, as the server stops.
  Result<> finish(RecordSummary& summary) override;

private:
  explicit ServeSink(std::chrono::nanoseconds interval) : interval_(interval) {}

  std::chrono::nanoseconds interval_;
  std::shared_ptr<dumps::Metrics> metrics_ = std::make_shared<dumps::Metrics>();
  std::shared_ptr<serve::LiveProfiles> live_ = std::make_shared<serve::LiveProfiles>();
  std::unique_ptr<serve::HttpServer> server_;
};

} // namespace flamebpf::pipeline
