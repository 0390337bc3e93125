// `flamebpf top`'s sink: each interval goes to the full-screen view (top/top_screen.h), or, with
// --batch, when standard output is no terminal or the terminal is "dumb", to one plain-text
// snapshot on standard output per interval, as `top -b` prints.
#pragma once

#include <memory>
#include <optional>
#include <sys/resource.h>

#include "cli/options.h"
#include "pipeline/interval_sink.h"
#include "top/top_screen.h"
#include "top/top_table.h"

namespace flamebpf::pipeline {

class TopSink final : public IntervalSink {
public:
  // Whether top draws on the terminal (else it prints snapshots): not --batch, standard output a
  // terminal, TERM set and not "dumb".
  static bool uses_the_screen(const cli::Config& config);

  explicit TopSink(const cli::Config& config);
  ~TopSink() override;

  std::optional<std::chrono::nanoseconds> interval() const override;
  void targets_added(const std::vector<target::Target>& added) override;
  void targets_removed(const std::vector<target::Target>& removed) override;
  void started() override;
  [[nodiscard]] Result<> consume(const profile::SymbolizedProfile& interval,
                                 IntervalFacts& facts) override;
  [[nodiscard]] Result<> finish(RecordSummary& summary) override;

private:
  // flamebpf's CPU since the last call, 100 = one CPU.
  double own_cpu_percent();
  // Saves the data behind the screen; says where.
  std::string save(const profile::SymbolizedProfile& profile);
  // Puts the log back on standard error and writes what it held while the screen was up.
  void release_the_log();

  const cli::Config& config_;
  std::unique_ptr<top::TopScreen> screen_; // null with --batch
  top::TopModel model_;                    // --batch's
  int saved_stderr_ = -1;                  // while the screen is up, the log goes to log_fd_
  int log_fd_ = -1;
  std::chrono::steady_clock::time_point last_cpu_wall_;
  double last_cpu_seconds_ = 0;
  RecordSummary summary_;
};

} // namespace flamebpf::pipeline
