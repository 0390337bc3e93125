#include "pipeline/recorder.h"

#include <fmt/format.h>
#include <optional>
#include <set>
#include <signal.h>
#include <unordered_map>

#include "agent/dump_writer.h"
#include "agent/stats.h"
#include "common/log.h"
#include "common/procfs.h"
#include "common/service_notify.h"
#include "drain/drain.h"
#include "drain/drop_report.h"
#include "emit/svg.h"
#include "jvm/agent_attacher.h"
#include "jvm/agent_library.h"
#include "pipeline/outputs.h"
#include "profile/accumulator.h"
#include "profile/by_target.h"
#include "sampler/sampler.h"
#include "symbolize/symbolizer.h"
#include "target/cgroup_watcher.h"
#include "target/target_set.h"

namespace flamebpf::pipeline {

std::atomic<bool> g_stop_requested{false};
std::atomic<bool> g_reresolve_requested{false};

namespace {

using Clock = std::chrono::steady_clock;

// Refreshes triggered by cgroup directories coming and going are at most this frequent.
constexpr auto kMinRefreshGap = std::chrono::milliseconds(100);
// Agent mode drains the kernel at least this often whatever its interval, adding up the window in
// memory: the kernel's maps then hold a few seconds of distinct stacks, not a whole minute's.
constexpr auto kAgentDrainPeriod = std::chrono::seconds(2);
// How often JVMs' perf maps are read between drains.
constexpr auto kPerfMapPollInterval = std::chrono::milliseconds(250);

Result<target::TargetSet> resolve_targets(const cli::Config& config)
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
  return target::TargetSet::create(options, target::ContainerDirectory(mount));
}

sampler::CgroupFilter filter_of(const target::Target& target)
{
  return {target.cgroup_id, target.level, 0, target.cgroup_path};
}

sampler::SamplerOptions sampler_options(const cli::Config& config, const target::TargetSet& targets)
{
  sampler::SamplerOptions options;
  options.frequency_hz = config.frequency_hz;
  options.stack_storage = config.stack_storage;
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

// Where a JVM is, for messages: its target, else its cgroup (a container not yet a target).
std::string describe_jvm(const profile::TargetNames& names, const symbolize::JvmFound& jvm)
{
  const std::string& name = profile::target_of(names, 0, jvm.key.pid, jvm.cgroup);
  if (name != names.unmatched)
    return "target " + name;
  if (!jvm.cgroup.empty() && jvm.cgroup != "/")
    return "cgroup " + jvm.cgroup;
  return "the host";
}

void install_signal_handlers()
{
  struct sigaction action {};
  action.sa_handler = [](int) { g_stop_requested.store(true); };
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0; // no SA_RESTART: the ring-buffer wait returns at once
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  struct sigaction hangup {};
  hangup.sa_handler = [](int) { g_reresolve_requested.store(true); };
  sigemptyset(&hangup.sa_mask);
  sigaction(SIGHUP, &hangup, nullptr);
}

// The dump options of agent mode.
agent::DumpOptions dump_options(const cli::Config& config)
{
  agent::DumpOptions options;
  options.directory = config.output_dir;
  options.formats = config.formats;
  options.retention = config.retention;
  options.diff_previous = config.diff_previous;
  options.svg = config.graph;
  return options;
}

// The age of the JIT perf maps of the processes in interval, with their targets.
std::vector<agent::PerfMapAge> perf_map_ages(const symbolize::Symbolizer& symbolizer,
                                             const profile::SymbolizedProfile& interval)
{
  std::unordered_map<uint32_t, std::string> targets;
  for (const auto& stack : interval.stacks)
    targets.try_emplace(stack.pid, stack.target);
  std::vector<agent::PerfMapAge> ages;
  auto now = agent::Clock::now();
  for (const auto& map : symbolizer.perf_maps()) {
    auto target = targets.find(map.pid);
    if (target == targets.end())
      continue;
    std::chrono::duration<double> age = now - map.modified;
    ages.push_back({map.pid, target->second, age.count()});
  }
  return ages;
}

uint64_t process_count(const profile::SymbolizedProfile& profile)
{
  std::set<uint32_t> pids;
  for (const auto& stack : profile.stacks)
    pids.insert(stack.pid);
  return pids.size();
}

// One file per target (named after it), or one file for all.
// Each output (one file per target when there are several), in the format its name says.
Result<std::vector<OutputFile>> write_outputs(const cli::Config& config,
                                              const std::vector<std::string>& outputs,
                                              const target::TargetSet& targets,
                                              const std::set<std::string>& target_names,
                                              const profile::SymbolizedProfile& total)
{
  auto graph = [&](bool target_frame) {
    emit::SvgOptions options = config.graph;
    options.target_frame = target_frame;
    return options;
  };
  std::vector<OutputFile> files;
  auto parts = profile::split_by_target(total);
  // A requested target without samples still gets its (empty) file: "no CPU used" is an answer.
  for (const auto& name : target_names)
    parts.try_emplace(name);
  std::set<std::string> names;
  for (const auto& [name, part] : parts)
    names.insert(name);
  auto file_names = profile::target_file_names(names);
  for (const auto& output : outputs) {
    if (!targets.per_target_output() || output == "-") {
      // Several targets in one stream stay apart only with their names as root frames.
      bool target_frame = config.target_frame || targets.per_target_output();
      if (auto written = write_profile(output, total, graph(target_frame)); !written)
        return fail(written.error());
      files.push_back({output, total.total_samples(), process_count(total)});
      continue;
    }
    for (const auto& [name, part] : parts) {
      std::string path = output_path_for_target(output, file_names.at(name));
      if (auto written = write_profile(path, part, graph(config.target_frame)); !written)
        return fail(written.error());
      files.push_back({path, part.total_samples(), process_count(part)});
    }
  }
  return files;
}

} // namespace

Result<RecordSummary> record(const cli::Config& config)
{
  auto targets = resolve_targets(config);
  if (!targets)
    return fail(targets.error());
  bool agent_mode = !config.output_dir.empty();
  std::optional<agent::DumpWriter> dumps;
  if (agent_mode) {
    auto writer = agent::DumpWriter::open(dump_options(config));
    if (!writer)
      return fail(writer.error());
    dumps.emplace(std::move(*writer));
  }
  // Without -o: the folded file and its flame graph beside it.
  std::vector<std::string> outputs{config.output};
  if (config.output.empty()) {
    std::string folded = default_output_path();
    outputs = {folded, folded.substr(0, folded.size() - 7) + ".svg"};
  }
  // A FIFO or a missing directory where the profile goes is said now, not after the recording.
  if (!agent_mode && !targets->per_target_output()) {
    for (const auto& output : outputs) {
      if (output == "-")
        continue;
      if (auto writable = check_output_path(output); !writable)
        return fail(usage_error(writable.error().message));
    }
  }
  // Every target requested or seen: named for the per-target outputs of a recording, only
  // counted by the agent, which sees containers come and go for weeks.
  std::set<std::string> target_names;
  size_t targets_seen = 0;
  auto remember_targets = [&](const std::vector<target::Target>& added) {
    targets_seen += added.size();
    if (!agent_mode) {
      for (const auto& target : added)
        target_names.insert(target.name);
    }
  };
  remember_targets(targets->live());

  jvm::AttacherOptions attacher_options;
  attacher_options.attach = config.attach;
  // On the heap: an attacher stuck on a container's file system is left to the process's exit.
  auto attacher_owner =
      std::make_unique<jvm::AgentAttacher>(jvm::agent_library(), attacher_options);
  jvm::AgentAttacher& attacher = *attacher_owner;

  // Sampling starts before the symbols load, so that start-up costs no samples; notices wait
  // in the ring buffer until the symbolizer exists.
  std::optional<symbolize::Symbolizer> symbolizer;
  // JVMs are found at a process's first sample, or at a later one for a launcher that was sampled
  // before it loaded the VM.
  auto hand_new_jvms_to_attacher = [&] {
    auto found = symbolizer->take_new_jvms();
    if (found.empty())
      return;
    auto names = targets->names();
    for (const auto& jvm : found)
      attacher.on_jvm(jvm.key.pid, jvm.keeps_perf_map, describe_jvm(names, jvm));
  };
  bool first_sample_seen = false;
  auto on_notice = [&](const fb_process_notice& notice) {
    if (!first_sample_seen) {
      first_sample_seen = true;
      // steady_clock is CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns().
      auto sampled_at = Clock::time_point(std::chrono::nanoseconds(notice.sample_time_ns));
      std::chrono::duration<double> after = sampled_at - config.started_at;
      spdlog::debug("first sample {:.3f} s after start (at {:.6f} s monotonic)", after.count(),
                    static_cast<double>(notice.sample_time_ns) / 1e9);
    }
    std::string comm(notice.comm, strnlen(notice.comm, sizeof notice.comm));
    symbolizer->on_process_seen({notice.tgid, notice.image_id}, comm);
    hand_new_jvms_to_attacher();
  };
  install_signal_handlers();
  auto sampler = sampler::Sampler::start(sampler_options(config, *targets), on_notice);
  if (!sampler)
    return fail(sampler.error());
  spdlog::debug("sampling {} at {} Hz; BPF maps take {:.1f} MiB", sampler->scope(),
                config.frequency_hz, static_cast<double>(sampler->map_memory_bytes()) / (1 << 20));
  auto kernel_names = symbolize::load_kernel_names();
  if (!kernel_names)
    return fail(kernel_names.error());
  symbolize::SymbolizerOptions symbolizer_options;
  symbolizer_options.java_signatures = config.java_signatures;
  symbolizer.emplace(std::move(*kernel_names), symbolizer_options);

  target::CgroupWatcher watcher;
  auto last_refresh = Clock::now();
  auto refresh_targets = [&](bool reresolve) -> Result<> {
    last_refresh = Clock::now();
    auto changes = targets->refresh(reresolve);
    for (const auto& removed : changes.removed) {
      if (removed.pid != 0)
        sampler->remove_pid_target(removed.pid);
      else
        sampler->remove_cgroup_target(removed.cgroup_id);
    }
    for (const auto& added : changes.added) {
      // One container that cannot be filtered (nested too deep) leaves the others profiled.
      if (auto ok = sampler->add_cgroup_target(filter_of(added)); !ok)
        spdlog::warn("{}; it is not profiled", ok.error().message);
    }
    remember_targets(changes.added);
    watcher.watch(targets->follows_changes() ? targets->watched_directories()
                                             : std::vector<std::string>{});
    return {};
  };
  watcher.watch(targets->follows_changes() ? targets->watched_directories()
                                           : std::vector<std::string>{});

  drain::Drainer drainer(sampler->map_reader());
  profile::Accumulator accumulator;
  // Agent mode: each interval's window, from one wall-clock boundary to the next.
  auto window_start = agent::Clock::now();
  agent::OwnUsage usage_before = agent::own_usage();
  uint64_t intervals = 0;
  uint64_t dump_files = 0;
  std::string stats_failure; // the last failure to append to the stats file, said once
  auto write_dumps = [&](const profile::SymbolizedProfile& interval,
                         agent::Clock::time_point window_end) {
    agent::Window window{window_start, window_end};
    window_start = window_end;
    ++intervals;
    agent::DumpReport report = dumps->write(interval, window);
    dump_files += report.files;
    agent::IntervalStats stats;
    stats.window = window;
    stats.profile = &interval;
    stats.perf_maps = perf_map_ages(*symbolizer, interval);
    stats.usage = agent::own_usage();
    auto kernel_maps = sampler->occupancy();
    stats.occupancy = {kernel_maps.known_images, kernel_maps.cgroup_targets,
                       kernel_maps.pid_targets, symbolizer->processes(), symbolizer->elf_files()};
    stats.interval_cpu_seconds = stats.usage.cpu_seconds - usage_before.cpu_seconds;
    usage_before = stats.usage;
    stats.files_written = report.files;
    stats.dumps_pending = report.pending;
    spdlog::info("{}", agent::summary_line(stats));
    auto appended = dumps->append_stats(agent::stats_json(stats));
    // A full disk is said once per interval; sampling goes on and the writes are retried.
    if (!report.error.empty())
      spdlog::error("{}; {} intervals kept in memory, retried at the next one", report.error,
                    report.pending);
    else if (!appended && appended.error().message != stats_failure)
      spdlog::error("{}", appended.error().message);
    // A stats file that stays unwritable (a FIFO in its place) is said once, not every interval.
    stats_failure = appended ? "" : appended.error().message;
  };
  auto drain_once = [&]() -> Result<> {
    // Pending notices first, so processes are captured before their samples are symbolized.
    if (auto polled = sampler->poll_notices(std::chrono::milliseconds(0)); !polled)
      return fail(polled.error());
    size_t dropped_before = targets->dropped_mark();
    auto raw = drainer.drain();
    if (!raw)
      return fail(raw.error());
    for (const auto& line : drain::describe_drops(raw->counters))
      spdlog::warn("{}", line);
    // A container whose cgroup appeared before the buffers were switched is found before its
    // samples are named: otherwise those the kernel took before it joined the filter would count
    // for the host.
    if (auto refreshed = refresh_targets(false); !refreshed)
      return fail(refreshed.error());
    auto symbolized = symbolizer->symbolize(*raw, targets->names());
    if (!symbolized)
      return fail(symbolized.error());
    // Targets dropped before this drain have no samples left in the kernel.
    targets->forget_dropped(dropped_before);
    symbolized->frequency_hz = config.frequency_hz;
    spdlog::debug("interval: {} samples in {} stacks, {} turned away by the in-kernel filter",
                  symbolized->total_samples(), symbolized->stacks.size(),
                  raw->counters.counts[FB_COUNTER_FILTERED]);
    accumulator.add(std::move(*symbolized));
    hand_new_jvms_to_attacher();
    for (const auto& image : symbolizer->forget_exited_processes()) {
      sampler->forget_image(image.pid, image.image_id);
      attacher.forget_if_gone(image.pid);
    }
    return {};
  };

  auto started = Clock::now();
  auto interval = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(config.interval_seconds));
  // Agent mode dumps at wall-clock multiples of the interval, so that every dump's window is, and
  // drains the kernel in between too.
  auto next_boundary = agent::next_boundary(agent::Clock::now(), interval);
  auto wall_to_steady = [&](agent::Clock::time_point wall) {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(wall - agent::Clock::now());
  };
  auto drain_period =
      agent_mode ? std::min<Clock::duration>(interval, kAgentDrainPeriod) : interval;
  auto next_periodic_drain = started + drain_period;
  auto schedule_drain = [&] {
    return agent_mode ? std::min(next_periodic_drain, wall_to_steady(next_boundary))
                      : next_periodic_drain;
  };
  auto next_drain = schedule_drain();
  bool bounded = config.duration_seconds > 0;
  auto deadline = started + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(config.duration_seconds));
  bool refresh_pending = false;
  auto next_perf_map_poll = started + kPerfMapPollInterval;
  ServiceNotifier service;
  service.ready();
  while (!g_stop_requested.load()) {
    service.alive();
    auto now = Clock::now();
    if (bounded && now >= deadline)
      break;
    if (now >= next_perf_map_poll) {
      symbolizer->poll_perf_maps();
      next_perf_map_poll = now + kPerfMapPollInterval;
    }
    if (now >= next_drain) {
      // A drain scheduled for the boundary may wake a hair early by the wall clock.
      bool at_boundary =
          agent_mode && agent::Clock::now() + std::chrono::milliseconds(5) >= next_boundary;
      if (auto drained = drain_once(); !drained)
        return fail(drained.error());
      if (at_boundary) {
        write_dumps(accumulator.take(), next_boundary);
        // After a stall (a suspended machine), the next boundary, not every missed one.
        next_boundary = agent::next_boundary(
            std::max(next_boundary, agent::Clock::now()) - std::chrono::nanoseconds(1), interval);
      }
      refresh_pending = false; // the drain refreshed the targets
      next_periodic_drain = std::max(next_periodic_drain + drain_period, Clock::now());
      next_drain = schedule_drain();
      continue;
    }
    if (g_reresolve_requested.exchange(false)) {
      spdlog::info("SIGHUP: resolving the targets again");
      service.reloading();
      if (auto refreshed = refresh_targets(true); !refreshed)
        return fail(refreshed.error());
      service.ready();
    }
    refresh_pending |= watcher.changed();
    if (refresh_pending && now - last_refresh >= kMinRefreshGap) {
      refresh_pending = false;
      if (auto refreshed = refresh_targets(false); !refreshed)
        return fail(refreshed.error());
    }
    auto wake = std::min(next_drain, next_perf_map_poll);
    if (bounded)
      wake = std::min(wake, deadline);
    auto wait = std::min<Clock::duration>(wake - now, std::chrono::milliseconds(200));
    if (refresh_pending)
      wait = std::min<Clock::duration>(wait, kMinRefreshGap);
    auto polled = sampler->poll_notices(
        std::chrono::duration_cast<std::chrono::milliseconds>(wait) + std::chrono::milliseconds(1));
    if (!polled)
      return fail(polled.error());
  }
  service.stopping();
  // JVMs being attached get the chance to name the last interval's frames.
  attacher.wait_idle(Clock::now() + attacher_options.timeout);
  if (!attacher.stop(Clock::now() + std::chrono::seconds(1))) {
    spdlog::warn("attaching to a JVM is stuck on its file system; flamebpf exits without it");
    (void)attacher_owner.release();
  }
  if (auto drained = drain_once(); !drained)
    return fail(drained.error());
  std::chrono::duration<double> sampled = Clock::now() - started;

  if (agent_mode) {
    write_dumps(accumulator.take(), agent::Clock::now());
    agent::DumpReport last = dumps->flush();
    dump_files += last.files;
    if (!last.error.empty())
      spdlog::error("{}; the dumps of {} intervals are lost", last.error, last.pending);
    RecordSummary summary;
    summary.output_dir = config.output_dir;
    summary.intervals = intervals;
    summary.dump_files = dump_files;
    summary.targets = targets_seen;
    summary.seconds = sampled.count();
    return summary;
  }

  const auto& total = accumulator.total();
  auto written = write_outputs(config, outputs, *targets, target_names, total);
  if (!written)
    return fail(written.error());

  RecordSummary summary;
  summary.outputs = std::move(*written);
  summary.samples = total.total_samples();
  summary.processes = process_count(total);
  summary.targets = target_names.size();
  summary.drops = drain::total_drops(total.counters);
  summary.seconds = sampled.count();
  return summary;
}

} // namespace flamebpf::pipeline
