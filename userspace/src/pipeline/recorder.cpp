#include "pipeline/recorder.h"

#include <fmt/format.h>
#include <iostream>
#include <optional>
#include <set>
#include <signal.h>

#include "common/atomic_file.h"
#include "common/log.h"
#include "common/procfs.h"
#include "drain/drain.h"
#include "drain/drop_report.h"
#include "emit/folded.h"
#include "emit/svg.h"
#include "jvm/agent_attacher.h"
#include "jvm/agent_library.h"
#include "pipeline/output_paths.h"
#include "pipeline/render.h"
#include "profile/accumulator.h"
#include "profile/by_target.h"
#include "sampler/sampler.h"
#include "symbolize/symbolizer.h"
#include "target/cgroup_watcher.h"
#include "target/target_set.h"

namespace flamebpf::pipeline {

std::atomic<bool> g_stop_requested{false};

namespace {

using Clock = std::chrono::steady_clock;

// Refreshes triggered by cgroup directories coming and going are at most this frequent.
constexpr auto kMinRefreshGap = std::chrono::milliseconds(100);
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
  return {target.cgroup_id, target.level, 0};
}

sampler::SamplerOptions sampler_options(const cli::Config& config, const target::TargetSet& targets)
{
  sampler::SamplerOptions options;
  options.frequency_hz = config.frequency_hz;
  options.stack_storage = config.stack_storage;
  options.count_storage = config.count_storage;
  options.keep_unmatched = targets.keeps_unmatched();
  for (const auto& target : targets.live()) {
    if (target.pid != 0)
      options.pids.push_back(target.pid);
    else
      options.cgroups.push_back(filter_of(target));
  }
  return options;
}

// "target web" for a process, in messages about it.
std::string describe_target(const target::TargetSet& targets, const fb_process_notice& notice)
{
  auto names = targets.names();
  if (auto it = names.by_cgroup.find(notice.target_cgroup_id); it != names.by_cgroup.end())
    return "target " + it->second;
  if (auto it = names.by_pid.find(notice.tgid); it != names.by_pid.end())
    return "target " + it->second;
  return "the host";
}

void install_stop_handlers()
{
  struct sigaction action {};
  action.sa_handler = [](int) { g_stop_requested.store(true); };
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0; // no SA_RESTART: the ring-buffer wait returns at once
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

// Writes profile to path: an SVG flame graph for ".svg", else folded stacks; "-" is stdout.
Result<> write_profile(const std::string& path,
                       const profile::SymbolizedProfile& profile,
                       const cli::Config& config,
                       bool target_frame)
{
  std::unique_ptr<emit::Emitter> emitter;
  if (is_svg_path(path)) {
    emit::SvgOptions options;
    options.title = config.title.empty() ? "Flame Graph" : config.title;
    options.width = config.width;
    options.inverted = config.inverted;
    options.min_frame_width = config.min_frame_width;
    options.target_frame = target_frame;
    emitter = std::make_unique<emit::SvgEmitter>(options);
  } else {
    emitter = std::make_unique<emit::FoldedEmitter>(target_frame);
  }
  if (path == "-") {
    if (!emitter->write(profile, std::cout))
      return fail(error("cannot write to stdout"));
    return {};
  }
  return write_file_atomically(path,
                               [&](std::ostream& out) { return emitter->write(profile, out); });
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
  std::vector<OutputFile> files;
  auto parts = profile::split_by_target(total);
  // A requested target without samples still gets its (empty) file: "no CPU used" is an answer.
  for (const auto& name : target_names)
    parts.try_emplace(name);
  for (const auto& output : outputs) {
    if (!targets.per_target_output() || output == "-") {
      // Several targets in one stream stay apart only with their names as root frames.
      bool target_frame = config.target_frame || targets.per_target_output();
      if (auto written = write_profile(output, total, config, target_frame); !written)
        return fail(written.error());
      files.push_back({output, total.total_samples(), process_count(total)});
      continue;
    }
    for (const auto& [name, part] : parts) {
      std::string path = output_path_for_target(output, name);
      if (auto written = write_profile(path, part, config, config.target_frame); !written)
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
  // Without -o: the folded file and its flame graph beside it.
  std::vector<std::string> outputs{config.output};
  if (config.output.empty()) {
    std::string folded = default_output_path();
    outputs = {folded, folded.substr(0, folded.size() - 7) + ".svg"};
  }
  // Every target requested or seen, for per-target outputs and the summary.
  std::set<std::string> target_names;
  auto remember_targets = [&] {
    for (const auto& target : targets->live())
      target_names.insert(target.name);
  };
  remember_targets();

  jvm::AttacherOptions attacher_options;
  attacher_options.attach = config.attach;
  jvm::AgentAttacher attacher(jvm::agent_library(), attacher_options);

  // Sampling starts before the symbols load, so that start-up costs no samples; notices wait
  // in the ring buffer until the symbolizer exists.
  std::optional<symbolize::Symbolizer> symbolizer;
  bool first_sample_seen = false;
  auto on_notice = [&](const fb_process_notice& notice) {
    if (!first_sample_seen) {
      first_sample_seen = true;
      // steady_clock is CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns().
      auto sampled_at = Clock::time_point(std::chrono::nanoseconds(notice.sample_time_ns));
      std::chrono::duration<double> after = sampled_at - config.started_at;
      spdlog::debug("first sample {:.3f} s after start", after.count());
    }
    std::string comm(notice.comm, strnlen(notice.comm, sizeof notice.comm));
    const auto& image = symbolizer->on_process_seen({notice.tgid, notice.image_id}, comm);
    if (image.jvm)
      attacher.on_jvm(notice.tgid, image.keeps_perf_map, describe_target(*targets, notice));
  };
  install_stop_handlers();
  auto sampler = sampler::Sampler::start(sampler_options(config, *targets), on_notice);
  if (!sampler)
    return fail(sampler.error());
  spdlog::debug("sampling {} CPUs at {} Hz", sampler->cpus().size(), config.frequency_hz);
  auto kernel_symbols = symbolize::KernelSymbols::load();
  if (!kernel_symbols)
    return fail(kernel_symbols.error());
  symbolize::SymbolizerOptions symbolizer_options;
  symbolizer_options.java_signatures = config.java_signatures;
  symbolizer.emplace(std::move(*kernel_symbols), symbolizer_options);

  target::CgroupWatcher watcher;
  auto last_refresh = Clock::now();
  auto refresh_targets = [&]() -> Result<> {
    last_refresh = Clock::now();
    auto changes = targets->refresh();
    for (const auto& removed : changes.removed) {
      if (removed.pid != 0)
        sampler->remove_pid_target(removed.pid);
      else
        sampler->remove_cgroup_target(removed.cgroup_id);
    }
    for (const auto& added : changes.added) {
      if (auto ok = sampler->add_cgroup_target(filter_of(added)); !ok)
        return fail(ok.error());
    }
    remember_targets();
    watcher.watch(targets->follows_changes() ? targets->watched_directories()
                                             : std::vector<std::string>{});
    return {};
  };
  watcher.watch(targets->follows_changes() ? targets->watched_directories()
                                           : std::vector<std::string>{});

  drain::Drainer drainer(sampler->map_reader());
  profile::Accumulator accumulator;
  auto drain_once = [&]() -> Result<> {
    // Pending notices first, so processes are captured before their samples are symbolized.
    if (auto polled = sampler->poll_notices(std::chrono::milliseconds(0)); !polled)
      return fail(polled.error());
    auto raw = drainer.drain();
    if (!raw)
      return fail(raw.error());
    for (const auto& line : drain::describe_drops(raw->counters))
      spdlog::warn("{}", line);
    auto symbolized = symbolizer->symbolize(*raw, targets->names());
    if (!symbolized)
      return fail(symbolized.error());
    // Targets dropped before this drain have no samples left in the kernel.
    targets->forget_dropped();
    symbolized->frequency_hz = config.frequency_hz;
    spdlog::debug("interval: {} samples in {} stacks", symbolized->total_samples(),
                  symbolized->stacks.size());
    accumulator.add(std::move(*symbolized));
    for (const auto& image : symbolizer->forget_exited_processes())
      sampler->forget_image(image.pid, image.image_id);
    return {};
  };

  auto started = Clock::now();
  auto interval = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(config.interval_seconds));
  auto next_drain = started + interval;
  bool bounded = config.duration_seconds > 0;
  auto deadline = started + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(config.duration_seconds));
  bool refresh_pending = false;
  auto next_perf_map_poll = started + kPerfMapPollInterval;
  while (!g_stop_requested.load()) {
    auto now = Clock::now();
    if (bounded && now >= deadline)
      break;
    if (now >= next_perf_map_poll) {
      symbolizer->poll_perf_maps();
      next_perf_map_poll = now + kPerfMapPollInterval;
    }
    if (now >= next_drain) {
      if (auto drained = drain_once(); !drained)
        return fail(drained.error());
      if (auto refreshed = refresh_targets(); !refreshed)
        return fail(refreshed.error());
      refresh_pending = false;
      next_drain += interval;
      continue;
    }
    refresh_pending |= watcher.changed();
    if (refresh_pending && now - last_refresh >= kMinRefreshGap) {
      refresh_pending = false;
      if (auto refreshed = refresh_targets(); !refreshed)
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
  // JVMs being attached get the chance to name the last interval's frames.
  attacher.wait_idle(Clock::now() + attacher_options.timeout);
  if (auto drained = drain_once(); !drained)
    return fail(drained.error());
  std::chrono::duration<double> sampled = Clock::now() - started;

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
