// Recording: sample until the duration ends or a signal arrives, draining and symbolizing the
// kernel's counts as the schedule says and following the targets as they come and go, and hand
// each interval's profile to the sinks the options ask for (pipeline/sinks.h): the profile files
// of a recording, agent mode's dumps, statistics and server, or top. Wires the stages; holds no
// stage logic itself.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "cli/options.h"
#include "common/capabilities.h"
#include "common/memory_account.h"
#include "common/result.h"
#include "common/service_notify.h"
#include "drain/drain.h"
#include "pipeline/interval_sink.h"
#include "pipeline/schedule.h"
#include "pipeline/sinks.h"
#include "profile/accumulator.h"
#include "sampler/sampler.h"
#include "symbolize/symbolizer.h"
#include "target/cgroup_watcher.h"
#include "target/target_set.h"
#include "unwind/table_loader.h"

namespace flamebpf::pipeline {

// Set by the SIGINT/SIGTERM handler; the recorder stops at the next poll.
extern std::atomic<bool> g_stop_requested;
// Set by the SIGHUP handler; the recorder resolves its targets again.
extern std::atomic<bool> g_reresolve_requested;

class Recorder {
public:
  // Records targets as config says into sinks; config must outlive the recorder. What the stages
  // hold is charged to memory (one of config.target_memory_mib if null), which the sinks were
  // given too.
  Recorder(const cli::Config& config,
           target::TargetSet targets,
           SinkList sinks,
           std::shared_ptr<MemoryAccount> memory = nullptr);
  ~Recorder();
  // The stages' callbacks point at the recorder: it stays where it was made.
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Starts the stages, records to the end, hands the last interval to the sinks and finishes them.
  [[nodiscard]] Result<RecordSummary> run();

private:
  // Starts sampling, then loads what symbolizing needs: start-up costs no samples, since notices
  // wait in the ring buffer until the symbolizer exists.
  [[nodiscard]] Result<> start();
  // A process's first sample: what /proc says of it is read at once and the notice is kept for
  // handle_notices(), so that taking notices never waits for the symbolizer's files.
  void on_notice(const fb_process_notice& notice);
  // Captures the processes of the notices taken so far.
  void handle_notices();
  // Takes the notices the kernel sent, waiting up to timeout for one; nothing from within the
  // sampler's own poll (long work's meanwhile task may come there).
  [[nodiscard]] Result<> poll_notices(std::chrono::milliseconds timeout);
  // Takes the notices the kernel sent (waiting up to timeout for one) and captures their
  // processes.
  [[nodiscard]] Result<> take_notices(std::chrono::milliseconds timeout);
  // Loads the queued processes' unwind tables for a slice of time.
  void load_unwind_tables();
  // Installs the unwind tables of runtimes' generated code that changed (as often as perf maps
  // are read).
  void install_code_tables();
  // Follows the targets that came and went (all of them resolved again with reresolve).
  void refresh_targets(bool reresolve);
  // Whether the watcher follows every directory the targets' refresh would scan, so that its
  // events say when a refresh is needed.
  bool watcher_follows_all() const;
  void watch_targets();
  // Whoever holds something of a process image forgets it, through image_holders_.
  void hold_images();
  void forget_image(const symbolize::ImageKey& image);
  // Collects the kernel's counts into the interval's profile: drained, named, and what the
  // drain taught the other stages handed on to them. With ends_interval, the targets' CPU time is
  // read just before the drain, which ends the interval's samples.
  [[nodiscard]] Result<> collect(bool ends_interval);
  // The CPU time each live target has used so far, by name; a target whose time cannot be read
  // is left out (and said once).
  std::map<std::string, double> read_cpu_times();
  // Each target's coverage over the interval that ends with profile, from its CPU times at the
  // interval's start and end; a target that falls short is said once.
  std::vector<profile::TargetCoverage> measure_coverage(const profile::SymbolizedProfile& profile);
  // Says what the kernel lost and cut in the drain.
  void report_drops(const profile::RawProfile& raw) const;
  // Names the drain's frames, with the targets' labels as they were at the drain, which ended at
  // drained_at (logged with the interval: the moment sample counts are compared with).
  [[nodiscard]] Result<profile::SymbolizedProfile>
  symbolize(const profile::RawProfile& raw, Schedule::Steady::time_point drained_at);
  // Unwind tables for the libraries the kernel found unmapped, and for runtimes' new code.
  void follow_unwind_tables();
  // Hands the runtimes' walks of their images to the unwinder.
  void install_process_walks();
  void log_unwind_tables() const;
  // Names again what could not be named when it was drained, and hands the interval's profile,
  // which ends at end, to the sinks; last: the recording's last interval.
  [[nodiscard]] Result<> end_interval(Schedule::Wall::time_point end, bool last);

  const cli::Config& config_;
  target::TargetSet targets_;
  SinkList sinks_;
  std::shared_ptr<MemoryAccount> memory_; // the breakdown's account, shared with the sinks
  std::optional<symbolize::Symbolizer> symbolizer_;
  std::optional<sampler::Sampler> sampler_;
  std::optional<drain::Drainer> drainer_; // reads sampler_'s maps
  // Loads unwind tables into sampler_'s maps; absent when the unwinder is off.
  std::optional<unwind::TableLoader> unwind_tables_;
  bool tables_queued_ = false; // processes wait for their unwind tables
  Schedule::Steady::time_point next_table_slice_;
  // Where each image's installed table of generated code starts, by (pid, image id).
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> code_table_starts_;
  // What forgets an image in each stage that holds one (hold_images()).
  std::vector<std::function<void(const symbolize::ImageKey&)>> image_holders_;
  target::CgroupWatcher watcher_;
  profile::Accumulator accumulator_; // the current interval
  MemoryCharge interval_memory_;     // what it holds, in the breakdown until its outputs have it
  // The CPU time each target had used at the current interval's start, and just before its last
  // drain, by name.
  std::map<std::string, double> cpu_at_interval_start_;
  std::map<std::string, double> cpu_at_last_drain_;
  std::set<std::string> cpu_time_unread_; // targets whose CPU time could not be read, said once
  std::set<std::string> coverage_warned_; // targets whose coverage fell short, said once
  Schedule::Wall::time_point interval_start_;
  Schedule::Steady::time_point last_refresh_;
  bool refresh_pending_ = false; // the watcher saw a change the targets have not followed yet
  std::string node_;             // the host's name, for the profiles' labels
  bool first_sample_seen_ = false;
  // Notices taken and not yet handled: during long work, notices are taken every
  // meanwhile::kStep and their processes' snapshots read, and the processes are captured after it
  // (from the snapshot if they exited by then).
  std::deque<fb_process_notice> taken_notices_;
  bool taking_notices_ = false; // within the sampler's poll
  ServiceNotifier service_;
};

// What the run config describes needs of capabilities beyond sampling (caps::role_set()).
caps::RunNeeds capability_needs(const cli::Config& config);

// Resolves config's targets (a usage error if one is unknown), opens the sinks config asks for
// (pipeline/sinks.h) and records.
[[nodiscard]] Result<RecordSummary> record(const cli::Config& config);

} // namespace flamebpf::pipeline
