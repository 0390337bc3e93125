#include "pipeline/recorder.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <malloc.h>
#include <signal.h>
#include <sys/utsname.h>
#include <utility>

#include "common/log.h"
#include "common/meanwhile.h"
#include "common/memory_account.h"
#include "common/procfs.h"
#include "pipeline/outputs.h"
#include "profile/coverage.h"
#include "profile/drop_report.h"
#include "runtimes/runtimes.h"
#include "serve/http_server.h"
#include "symbolize/debuginfod.h"
#include "target/cpu_time.h"

namespace flamebpf::pipeline {

std::atomic<bool> g_stop_requested{false};
std::atomic<bool> g_reresolve_requested{false};

namespace {

using Steady = Schedule::Steady;
using Wall = Schedule::Wall;

// Refreshes triggered by cgroup directories coming and going are at most this frequent.
constexpr auto kMinRefreshGap = std::chrono::milliseconds(100);
// Where the watcher follows every directory of the tree, a drain refreshes the targets only when
// it has seen a change, or when the last refresh is this old (a net under the events).
constexpr auto kMaxRefreshGap = std::chrono::minutes(5);
// The longest the loop spends loading unwind tables before it polls again (one image may take
// longer: it is loaded whole); it then waits four times as long before the next slice.
constexpr auto kUnwindTableSlice = std::chrono::milliseconds(20);
// The longest the end of a recording waits for inline indexes being built, so that its files name
// the inlined functions of every interval (a large binary's takes about a second).
constexpr auto kLastNamesWait = std::chrono::seconds(2);

Result<target::TargetSet> resolve_targets(const cli::Config& config,
                                          const std::shared_ptr<MemoryAccount>& memory)
{
  target::TargetOptions options;
  options.cgroups = config.cgroups;
  options.pids = config.pids;
  options.all_containers = config.all_containers;
  options.containers_only = config.containers_only;
  std::string mount;
  if (!config.cgroups.empty() || config.all_containers) {
    auto found = procfs::cgroup2_mount();
    if (!found)
      return fail(found.error());
    mount = *found;
  }
  target::ContainerDirectory directory(mount);
  directory.measure_memory(memory);
  return target::TargetSet::create(options, std::move(directory));
}

sampler::CgroupFilter filter_of(const target::Target& target)
{
  return {target.cgroup_id, target.level, target.cgroup_path};
}

sampler::SamplerOptions sampler_options(const cli::Config& config, const target::TargetSet& targets)
{
  sampler::SamplerOptions options;
  options.frequency_hz = config.frequency_hz;
  options.stack_storage = config.stack_storage;
  options.unwind_memory = size_t{config.unwind_memory_mib} << 20;
  options.count_storage = config.count_storage;
  options.keep_unmatched = targets.keeps_unmatched();
  options.explicit_targets = !config.all_containers;
  for (const auto& target : targets.live()) {
    if (target.pid != 0)
      options.pids.push_back(target.pid);
    else
      options.cgroups.push_back(filter_of(target));
  }
  return options;
}

// SIGHUP asks a recording to resolve its targets again, as a service reloads; for top, whose
// terminal it is, it means the terminal went away, and ends it (stops_on_hangup).
void install_signal_handlers(bool stops_on_hangup)
{
  struct sigaction action {};
  action.sa_handler = [](int) { g_stop_requested.store(true); };
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0; // no SA_RESTART: the ring-buffer wait returns at once
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  if (stops_on_hangup) {
    sigaction(SIGHUP, &action, nullptr);
    return;
  }
  struct sigaction hangup {};
  hangup.sa_handler = [](int) { g_reresolve_requested.store(true); };
  sigemptyset(&hangup.sa_mask);
  sigaction(SIGHUP, &hangup, nullptr);
}

Steady::duration seconds(double value)
{
  return std::chrono::duration_cast<Steady::duration>(std::chrono::duration<double>(value));
}

} // namespace

Recorder::Recorder(const cli::Config& config,
                   target::TargetSet targets,
                   SinkList sinks,
                   std::shared_ptr<MemoryAccount> memory)
    : config_(config), targets_(std::move(targets)), sinks_(std::move(sinks)),
      memory_(memory ? std::move(memory)
                     : MemoryAccount::create(uint64_t{config.target_memory_mib} << 20)),
      interval_memory_(memory_, MemoryKind::kIntervals)
{
}

Recorder::~Recorder()
{
  meanwhile::set_task({});
}

Result<> Recorder::start()
{
  if (struct utsname host{}; ::uname(&host) == 0)
    node_ = host.nodename;
  sinks_.targets_added(targets_.live());
  install_signal_handlers(config_.mode == cli::Mode::kTop);
  auto sampler =
      sampler::Sampler::start(sampler_options(config_, targets_),
                              [this](const fb_process_notice& notice) { on_notice(notice); });
  if (!sampler)
    return fail(sampler.error());
  sampler_.emplace(std::move(*sampler));
  // Sampling has started: the first interval's CPU time counts from here.
  cpu_at_interval_start_ = read_cpu_times();
  if (auto* table_maps = sampler_->table_maps()) {
    unwind_tables_.emplace(*table_maps);
    unwind_tables_->measure_memory(memory_);
  }
  spdlog::debug("sampling {} at {} Hz; BPF maps take {:.1f} MiB", sampler_->scope(),
                config_.frequency_hz,
                static_cast<double>(sampler_->map_memory_bytes()) / (1 << 20));
  auto kernel_names = symbolize::load_kernel_names();
  if (!kernel_names)
    return fail(kernel_names.error());
  symbolize::SymbolizerOptions symbolizer_options;
  symbolizer_options.java_signatures = config_.runtimes.java_signatures;
  symbolizer_options.memory = memory_;
  if (!config_.debuginfod_urls.empty()) {
    symbolize::DebuginfodOptions fetching;
    fetching.urls = config_.debuginfod_urls;
    fetching.cache_dir = config_.debuginfod_cache;
    fetching.timeout = std::chrono::seconds(config_.debuginfod_timeout_seconds);
    fetching.max_cache_bytes = uint64_t{config_.debuginfod_cache_mib} << 20;
    auto fetcher = symbolize::DebugFetcher::start(fetching);
    if (fetcher) {
      spdlog::info("debuginfod: missing debug files are fetched from {} into {}", fetching.urls,
                   fetching.cache_dir);
      symbolizer_options.debug_fetcher = std::move(*fetcher);
    } else {
      spdlog::warn("debuginfod: no debug files are fetched: {}", fetcher.error().message);
    }
  } else if (const char* urls = std::getenv("DEBUGINFOD_URLS"); urls && *urls) {
    spdlog::info("debuginfod: DEBUGINFOD_URLS is set, but debug files are fetched only from the "
                 "servers --debuginfod names: a fetch tells a server every container's build IDs");
  }
  symbolizer_.emplace(std::move(*kernel_names), symbolizer_options);
  symbolizer_->set_targets(targets_.names());
  runtimes::RuntimeOptions runtime_options = config_.runtimes;
  runtime_options.unwinder = unwind_tables_.has_value();
  for (auto& runtime : runtimes::make_runtimes(runtime_options))
    symbolizer_->add_runtime(std::move(runtime));
  // Long work takes the notices meanwhile (not within the poll that delivers them).
  meanwhile::set_task([this] { (void)poll_notices(std::chrono::milliseconds(0)); });
  last_refresh_ = Steady::now();
  watch_targets();
  drainer_.emplace(sampler_->map_reader());
  hold_images();
  return {};
}

void Recorder::hold_images()
{
  image_holders_.push_back([this](const symbolize::ImageKey& image) {
    sampler_->forget_image(image.pid, image.image_id);
  });
  image_holders_.push_back([this](const symbolize::ImageKey& image) {
    code_table_starts_.erase({image.pid, image.image_id});
  });
  if (unwind_tables_)
    image_holders_.push_back([this](const symbolize::ImageKey& image) {
      unwind_tables_->forget_image(image.pid, image.image_id);
    });
}

void Recorder::on_notice(const fb_process_notice& notice)
{
  if (!first_sample_seen_) {
    first_sample_seen_ = true;
    // steady_clock is CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns().
    auto sampled_at = Steady::time_point(std::chrono::nanoseconds(notice.sample_time_ns));
    std::chrono::duration<double> after = sampled_at - config_.started_at;
    spdlog::debug("first sample {:.3f} s after start (at {:.6f} s monotonic)", after.count(),
                  static_cast<double>(notice.sample_time_ns) / 1e9);
  }
  symbolizer_->keep_snapshot({notice.tgid, notice.image_id});
  taken_notices_.push_back(notice);
}

void Recorder::handle_notices()
{
  while (!taken_notices_.empty()) {
    // Taken off first: capturing may take further notices.
    fb_process_notice notice = taken_notices_.front();
    taken_notices_.pop_front();
    std::string comm(notice.comm, strnlen(notice.comm, sizeof notice.comm));
    symbolizer_->on_process_seen({notice.tgid, notice.image_id}, comm, notice.cgroup_id);
    if (unwind_tables_) {
      unwind_tables_->queue_process(notice.tgid, notice.image_id);
      tables_queued_ = true;
    }
  }
  // A runtime found at the capture has its frames walked from the next sample on.
  if (unwind_tables_)
    install_process_walks();
}

Result<> Recorder::poll_notices(std::chrono::milliseconds timeout)
{
  if (taking_notices_)
    return {};
  taking_notices_ = true;
  auto polled = sampler_->poll_notices(timeout);
  taking_notices_ = false;
  return polled;
}

Result<> Recorder::take_notices(std::chrono::milliseconds timeout)
{
  if (auto polled = poll_notices(timeout); !polled)
    return fail(polled.error());
  handle_notices();
  return {};
}

void Recorder::install_process_walks()
{
  for (const auto& walk : symbolizer_->take_process_walks()) {
    if (auto set = unwind_tables_->set_cpython_walk(walk.pid, walk.image_id,
                                                    walk.cpython ? &*walk.cpython : nullptr);
        !set)
      spdlog::debug("pid {}: {}", walk.pid, set.error().message);
  }
}

void Recorder::install_code_tables()
{
  install_process_walks();
  for (const auto& update : symbolizer_->take_code_tables()) {
    const auto& table = update.table;
    uint64_t start = table.base_address;
    uint64_t end = start + table.rows.back().pc_offset;
    std::pair key{update.pid, update.image_id};
    // A table whose code starts elsewhere now replaces the old one, which no longer covers it.
    if (auto old = code_table_starts_.find(key);
        old != code_table_starts_.end() && old->second != start)
      unwind_tables_->remove_code_table(update.pid, update.image_id, old->second);
    code_table_starts_[key] = start;
    if (auto installed =
            unwind_tables_->install_code_table(update.pid, update.image_id, start, end, table);
        !installed)
      spdlog::debug("pid {}: the unwind table of its generated code is not installed: {}",
                    update.pid, installed.error().message);
  }
}

bool Recorder::watcher_follows_all() const
{
  // Without it (process targets, or one cgroup), a refresh checks the few targets there are.
  return targets_.follows_changes() && watcher_.size() == targets_.watched_directories().size();
}

void Recorder::refresh_targets(bool reresolve)
{
  refresh_pending_ = false;
  last_refresh_ = Steady::now();
  auto changes = targets_.refresh(reresolve);
  // A target that joins is measured from the next interval on; one that leaves, no more. (A name
  // may come back as another cgroup, which counts its CPU time from 0.)
  for (const auto& changed : {&changes.added, &changes.removed}) {
    for (const auto& target : *changed) {
      cpu_at_interval_start_.erase(target.name);
      cpu_at_last_drain_.erase(target.name);
    }
  }
  for (const auto& removed : changes.removed) {
    if (removed.pid != 0)
      sampler_->remove_pid_target(removed.pid);
    else
      sampler_->remove_cgroup_target(removed.cgroup_id);
  }
  for (const auto& added : changes.added) {
    // One container that cannot be filtered (nested too deep) leaves the others profiled.
    if (auto ok = sampler_->add_cgroup_target(filter_of(added)); !ok)
      spdlog::warn("{}; it is not profiled", ok.error().message);
  }
  if (!changes.added.empty() || !changes.removed.empty())
    symbolizer_->set_targets(targets_.names());
  sinks_.targets_added(changes.added);
  if (!changes.removed.empty())
    sinks_.targets_removed(changes.removed);
  watch_targets();
}

void Recorder::watch_targets()
{
  // A directory watched only now may have had a container made in it since the scan that found
  // the directory: the targets are scanned again, once the watch is on.
  if (watcher_.watch(targets_.follows_changes() ? targets_.watched_directories()
                                                : std::vector<std::string>{}) > 0)
    refresh_pending_ = true;
}

Result<> Recorder::collect(bool ends_interval)
{
  if (auto taken = sampler_->take_full_sampler(); !taken)
    return fail(taken.error());
  // Pending notices first, so processes are captured before their samples are symbolized.
  if (auto taken = take_notices(std::chrono::milliseconds(0)); !taken)
    return fail(taken.error());
  size_t dropped_before = targets_.dropped_mark();
  // As close to the switch of buffers as can be: the samples and the CPU time end together.
  if (ends_interval)
    cpu_at_last_drain_ = read_cpu_times();
  auto raw = drainer_->drain();
  if (!raw)
    return fail(raw.error());
  auto drained_at = Steady::now();
  report_drops(*raw);
  // A container whose cgroup appeared before the buffers were switched is found before its
  // samples are named: otherwise those the kernel took before it joined the filter would count
  // for the host. Its directory's event is in the watcher's queue by now.
  refresh_pending_ |= watcher_.changed();
  if (refresh_pending_ || !watcher_follows_all() || drained_at - last_refresh_ >= kMaxRefreshGap)
    refresh_targets(false);
  auto symbolized = symbolize(*raw, drained_at);
  if (!symbolized)
    return fail(symbolized.error());
  // Targets dropped before this drain have no samples left in the kernel.
  targets_.forget_dropped(dropped_before);
  sinks_.drained(*symbolized);
  accumulator_.add(std::move(*symbolized));
  (void)interval_memory_.set(accumulator_.held_bytes()); // measured: never refused
  follow_unwind_tables();
  for (const auto& image : symbolizer_->forget_exited_processes())
    forget_image(image);
  log_unwind_tables();
  return {};
}

std::map<std::string, double> Recorder::read_cpu_times()
{
  std::map<std::string, double> times;
  for (const auto& target : targets_.live()) {
    auto used = target::cpu_seconds_used(target);
    if (used) {
      times[target.name] = *used;
      continue;
    }
    // A target that is gone is dropped at the next refresh; any other failure is said once.
    if (used.error().errno_value != ENOENT && cpu_time_unread_.insert(target.name).second)
      spdlog::warn("target {}: no coverage: {}", target.name, used.error().message);
  }
  return times;
}

std::vector<profile::TargetCoverage>
Recorder::measure_coverage(const profile::SymbolizedProfile& profile)
{
  std::map<std::string, double> used;
  for (const auto& [name, now] : cpu_at_last_drain_) {
    // A counter that went back is another cgroup or process under the same name.
    if (auto before = cpu_at_interval_start_.find(name);
        before != cpu_at_interval_start_.end() && now >= before->second)
      used[name] = now - before->second;
  }
  cpu_at_interval_start_ = std::exchange(cpu_at_last_drain_, {});
  auto coverage = profile::measure_coverage(profile, used);
  if (!coverage.empty())
    spdlog::debug("{}", profile::coverage_summary(coverage));
  for (const auto& target : coverage) {
    if (profile::falls_short(target) && coverage_warned_.insert(target.target).second)
      spdlog::warn("{}", profile::coverage_warning(target, profile.frequency_hz));
  }
  return coverage;
}

void Recorder::report_drops(const profile::RawProfile& raw) const
{
  for (const auto& line : profile::describe_drops(raw.counters))
    spdlog::warn("{}", line);
  for (const auto& line : profile::describe_cut_stacks(raw.counters))
    spdlog::debug("{}", line);
}

Result<profile::SymbolizedProfile> Recorder::symbolize(const profile::RawProfile& raw,
                                                       Steady::time_point drained_at)
{
  // Taken with the names: the targets dropped before this drain are forgotten after it.
  auto labels = targets_.labels();
  auto pod_container_labels = targets_.pod_container_labels();
  auto symbolized = symbolizer_->symbolize(raw, targets_.names());
  if (!symbolized)
    return fail(symbolized.error());
  symbolized->frequency_hz = config_.frequency_hz;
  symbolized->target_labels = std::move(labels);
  symbolized->pod_container_labels = std::move(pod_container_labels);
  symbolized->node = node_;
  // The drain's time, on the clock of the first sample's line: what a sample count is compared
  // with (a workload's CPU time) is measured between the two.
  spdlog::debug("interval: {} samples in {} stacks, {} turned away by the in-kernel filter; "
                "drained at {:.6f} s monotonic",
                symbolized->total_samples(), symbolized->stacks.size(),
                raw.counters.counts[FB_COUNTER_FILTERED],
                std::chrono::duration<double>(drained_at.time_since_epoch()).count());
  return symbolized;
}

void Recorder::follow_unwind_tables()
{
  if (!unwind_tables_)
    return;
  // Libraries loaded since the image's maps were read: once per interval at most.
  for (const auto& image : sampler_->missed_images())
    unwind_tables_->on_mapping_missed(image.tgid, image.image_id);
  install_code_tables();
}

void Recorder::forget_image(const symbolize::ImageKey& image)
{
  for (const auto& holder : image_holders_)
    holder(image);
}

void Recorder::log_unwind_tables() const
{
  if (!unwind_tables_ || !log::verbose())
    return;
  const auto& counts = unwind_tables_->counts();
  // The row array grows with the tables: the maps' memory now, not only at start.
  spdlog::debug("unwind tables: {} tables in {} rows for {} images; {} files built, {} shared "
                "({} found copies unread), {} failed, {} partly malformed, {} stalled, {} left out "
                "for room; {} idle tables in {} rows; maps read again {} times after a miss ({} "
                "found nothing new; {} misses let pass); BPF maps take {:.1f} MiB",
                unwind_tables_->live_tables(), unwind_tables_->rows_used(),
                unwind_tables_->images(), counts.files_built, counts.files_shared,
                counts.files_replayed, counts.files_failed, counts.files_malformed,
                counts.files_stalled, counts.files_no_room, unwind_tables_->idle_tables(),
                unwind_tables_->idle_rows(), counts.maps_rereads, counts.maps_rereads_fruitless,
                counts.misses_let_pass,
                static_cast<double>(sampler_->map_memory_bytes()) / (1 << 20));
}

void Recorder::load_unwind_tables()
{
  if (!unwind_tables_)
    return;
  // A slice at a time, a fifth of the time at most: the notices and drains keep their pace, and
  // the processes being profiled keep their CPU, while a host's worth of new processes (as at
  // start) has its tables loaded over the next seconds.
  auto now = Steady::now();
  if (!tables_queued_ || now < next_table_slice_)
    return;
  tables_queued_ = unwind_tables_->load_queued(now + kUnwindTableSlice);
  next_table_slice_ = Steady::now() + 4 * kUnwindTableSlice;
}

Result<> Recorder::end_interval(Wall::time_point end, bool last)
{
  IntervalFacts facts;
  facts.window = {interval_start_, end};
  interval_start_ = end;
  auto kernel_maps = sampler_->occupancy();
  if (unwind_tables_)
    unwind_tables_->measure();
  facts.occupancy = {kernel_maps.known_images,    kernel_maps.cgroup_targets,
                     kernel_maps.pid_targets,     symbolizer_->processes(),
                     symbolizer_->elf_files(),    symbolizer_->symbol_bytes(),
                     symbolizer_->symbol_tables()};
  for (const auto& map : symbolizer_->perf_maps())
    facts.perf_maps.push_back({map.pid, map.modified});
  // Names that arrived during the interval (debug files, inline indexes, perf maps) name its
  // earlier drains' frames too; a recording's one interval waits a little for the inline indexes
  // still being built, since its files are written once.
  auto interval = accumulator_.take();
  auto wait_until =
      last && !sinks_.interval() ? Steady::now() + kLastNamesWait : Steady::time_point{};
  symbolizer_->name_late(interval, wait_until);
  // Later intervals are symbolized with what is known now; the frames of an agent's window, once
  // it is written, are not named again.
  if (sinks_.interval())
    symbolizer_->forget_late_frames();
  // Measured on the names as written.
  facts.coverage = measure_coverage(interval);
  // The stats line's breakdown sums to the heap as it is now.
  memory_->measure_heap();
  auto consumed = sinks_.consume(interval, std::move(facts));
  interval_memory_.reset();
  interval = {};
  // An interval's stacks and names, and its reads, are freed into the heap; glibc would keep its
  // free pages resident until the heap's top is free (7 MiB on 250 containers, bench/scale.sh).
  // Handing them back takes a walk of the free chunks, once an interval.
  ::malloc_trim(0);
  return consumed;
}

Result<RecordSummary> Recorder::run()
{
  if (auto started = start(); !started)
    return fail(started.error());
  Schedule::Options timing;
  timing.drain_period = seconds(config_.interval_seconds);
  timing.interval = sinks_.interval();
  timing.max_drain_period = max_drain_period(config_.frequency_hz);
  if (config_.duration_seconds > 0)
    timing.duration = seconds(config_.duration_seconds);
  auto started = Steady::now();
  interval_start_ = Wall::now();
  Schedule schedule(timing, started, interval_start_);
  sinks_.started();
  // Started: what only the start needed goes (joining the host's namespaces, /proc/kallsyms;
  // CAP_SYS_ADMIN unless it stands in for CAP_BPF, CAP_PERFMON or CAP_CHECKPOINT_RESTORE), and so
  // do those of the runtimes' helpers (attaching). Threads started from now on inherit what stays;
  // those started before (the runtimes' helpers, the server's, top's screen) narrowed themselves
  // as they started.
  caps::narrow_this_thread(caps::Role::kPipeline);
  service_.ready();
  while (!g_stop_requested.load()) {
    service_.alive();
    if (auto taken = sampler_->take_full_sampler(); !taken)
      return fail(taken.error());
    auto now = Steady::now();
    if (schedule.finished(now))
      break;
    if (schedule.perf_maps_due(now)) {
      symbolizer_->poll_runtimes();
      // As often as perf maps: new JIT code unwinds by frame pointers until its rows are in.
      if (unwind_tables_)
        install_code_tables();
      schedule.perf_maps_read(now);
    }
    if (auto wanted = sinks_.drain_wanted_by())
      schedule.drain_by(*wanted);
    if (schedule.drain_due(now)) {
      bool ends_interval = schedule.ends_interval(Wall::now());
      if (auto drained = collect(ends_interval); !drained)
        return fail(drained.error());
      if (ends_interval) {
        if (auto consumed = end_interval(schedule.interval_end(), false); !consumed)
          return fail(consumed.error());
        schedule.interval_ended(Wall::now());
      }
      schedule.drained(Steady::now(), Wall::now());
      continue;
    }
    if (g_reresolve_requested.exchange(false)) {
      spdlog::info("SIGHUP: resolving the targets again");
      service_.reloading();
      refresh_targets(true);
      service_.ready();
    }
    refresh_pending_ |= watcher_.changed();
    if (refresh_pending_ && now - last_refresh_ >= kMinRefreshGap) {
      refresh_targets(false);
    }
    auto wait =
        std::min<Steady::duration>(schedule.next_wake() - now, std::chrono::milliseconds(200));
    if (refresh_pending_)
      wait = std::min<Steady::duration>(wait, kMinRefreshGap);
    if (tables_queued_)
      wait = std::clamp<Steady::duration>(next_table_slice_ - now, Steady::duration::zero(), wait);
    auto taken = take_notices(std::chrono::duration_cast<std::chrono::milliseconds>(wait) +
                              std::chrono::milliseconds(1));
    if (!taken)
      return fail(taken.error());
    load_unwind_tables();
  }
  service_.stopping();
  // Runtimes' helpers (one attaching an agent) get the chance to name the last interval's frames.
  symbolizer_->stop_runtimes();
  if (auto drained = collect(true); !drained)
    return fail(drained.error());
  std::chrono::duration<double> sampled = Steady::now() - started;
  if (auto consumed = end_interval(Wall::now(), true); !consumed)
    return fail(consumed.error());
  RecordSummary summary;
  if (auto finished = sinks_.finish(summary); !finished)
    return fail(finished.error());
  summary.seconds = sampled.count();
  return summary;
}

caps::RunNeeds capability_needs(const cli::Config& config)
{
  caps::RunNeeds needs;
  needs.attach_agents = config.runtimes.attach;
  // Profile files (a recording's, or the views top saves) go to the user who ran sudo.
  bool to_sudo_user = profile_file_access().owner_uid.has_value();
  bool top = config.mode == cli::Mode::kTop;
  needs.chown_profiles = to_sudo_user && !top && config.output_dir.empty();
  needs.chown_saved_views = to_sudo_user && top;
  if (!config.listen.empty()) {
    auto address = serve::parse_listen_address(config.listen);
    needs.bind_privileged_port = address && address->port != 0 && address->port < 1024;
  }
  return needs;
}

Result<RecordSummary> record(const cli::Config& config)
{
  // One account for every stage's memory: what targets make flamebpf hold is charged to their
  // shares, and the rest measured beside it, so that the breakdown is the account's.
  auto memory = MemoryAccount::create(uint64_t{config.target_memory_mib} << 20);
  auto targets = resolve_targets(config, memory);
  if (!targets)
    return fail(targets.error());
  auto sinks = open_sinks(config, *targets, memory);
  if (!sinks)
    return fail(sinks.error());
  Recorder recorder(config, std::move(*targets), std::move(*sinks), memory);
  return recorder.run();
}

} // namespace flamebpf::pipeline
