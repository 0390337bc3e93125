#include "pipeline/recorder.h"

#include <cerrno>
#include <ctime>
#include <fmt/format.h>
#include <iostream>
#include <optional>
#include <set>
#include <signal.h>
#include <unordered_map>

#include "common/atomic_file.h"
#include "common/log.h"
#include "common/procfs.h"
#include "drain/drain.h"
#include "drain/drop_report.h"
#include "emit/folded.h"
#include "profile/accumulator.h"
#include "sampler/sampler.h"
#include "symbolize/symbolizer.h"
#include "target/cgroup_resolver.h"

namespace flamebpf::pipeline {

std::atomic<bool> g_stop_requested{false};

namespace {

using Clock = std::chrono::steady_clock;

struct ResolvedTargets {
  sampler::SamplerOptions sampler_options;
  std::unordered_map<uint64_t, std::string> names; // cgroup id -> display name
};

Result<ResolvedTargets> resolve_targets(const cli::Config& config)
{
  ResolvedTargets resolved;
  auto& options = resolved.sampler_options;
  options.frequency_hz = config.frequency_hz;
  options.stack_storage = config.stack_storage;
  options.count_storage = config.count_storage;
  options.filter = !config.pids.empty() || !config.cgroups.empty();
  for (uint32_t pid : config.pids) {
    // The kernel filter matches processes (tgids); a thread id stands for its process.
    auto tgid = procfs::read_tgid(pid);
    if (!tgid)
      return fail(usage_error(fmt::format("no process with pid {}", pid)));
    if (*tgid != pid)
      spdlog::info("pid {} is a thread of process {}; profiling the process", pid, *tgid);
    options.pids.push_back(*tgid);
  }
  if (!config.cgroups.empty()) {
    auto mount = procfs::cgroup2_mount();
    if (!mount)
      return fail(mount.error());
    uint32_t index = 0;
    for (const auto& argument : config.cgroups) {
      auto target = target::resolve_cgroup(argument, *mount);
      if (!target)
        return fail(usage_error(target.error().message));
      spdlog::debug("target {}: cgroup id {}, level {}", target->path, target->cgroup_id,
                    target->level);
      options.cgroups.push_back({target->cgroup_id, target->level, index++});
      resolved.names[target->cgroup_id] = target->name;
    }
  }
  return resolved;
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

Result<> write_output(const std::string& path, const profile::SymbolizedProfile& profile)
{
  emit::FoldedEmitter emitter;
  if (path == "-") {
    auto written = emitter.write(profile, std::cout);
    if (!written)
      return fail(error("cannot write to stdout"));
    return {};
  }
  auto written =
      write_file_atomically(path, [&](std::ostream& out) { return emitter.write(profile, out); });
  if (!written)
    return fail(written.error());
  return {};
}

} // namespace

std::string default_output_path()
{
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
  return std::string("./flamebpf-") + stamp + ".folded";
}

Result<RecordSummary> record(const cli::Config& config)
{
  auto targets = resolve_targets(config);
  if (!targets)
    return fail(targets.error());
  std::string output = config.output.empty() ? default_output_path() : config.output;

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
    symbolizer->on_process_seen({notice.tgid, notice.image_id}, comm);
  };
  install_stop_handlers();
  auto sampler = sampler::Sampler::start(targets->sampler_options, on_notice);
  if (!sampler)
    return fail(sampler.error());
  spdlog::debug("sampling {} CPUs at {} Hz", sampler->cpus().size(), config.frequency_hz);
  auto kernel_symbols = symbolize::KernelSymbols::load();
  if (!kernel_symbols)
    return fail(kernel_symbols.error());
  symbolizer.emplace(std::move(*kernel_symbols), targets->names);

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
    auto symbolized = symbolizer->symbolize(*raw);
    if (!symbolized)
      return fail(symbolized.error());
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
  while (!g_stop_requested.load()) {
    auto now = Clock::now();
    if (bounded && now >= deadline)
      break;
    if (now >= next_drain) {
      if (auto drained = drain_once(); !drained)
        return fail(drained.error());
      next_drain += interval;
      continue;
    }
    auto wake = bounded ? std::min(next_drain, deadline) : next_drain;
    auto wait = std::min<Clock::duration>(wake - now, std::chrono::milliseconds(200));
    auto polled = sampler->poll_notices(
        std::chrono::duration_cast<std::chrono::milliseconds>(wait) + std::chrono::milliseconds(1));
    if (!polled)
      return fail(polled.error());
  }
  if (auto drained = drain_once(); !drained)
    return fail(drained.error());
  std::chrono::duration<double> sampled = Clock::now() - started;

  const auto& total = accumulator.total();
  if (auto written = write_output(output, total); !written)
    return fail(written.error());

  RecordSummary summary;
  summary.output_path = output;
  summary.samples = total.total_samples();
  std::set<uint32_t> pids;
  for (const auto& stack : total.stacks)
    pids.insert(stack.pid);
  summary.processes = pids.size();
  summary.targets = config.pids.size() + config.cgroups.size();
  summary.drops = drain::total_drops(total.counters);
  summary.seconds = sampled.count();
  return summary;
}

} // namespace flamebpf::pipeline
