#include "pipeline/stats_sink.h"

#include <unordered_map>

#include "common/log.h"

namespace flamebpf::pipeline {
namespace {

// The age of the JIT perf maps of the processes in interval, with their targets.
std::vector<dumps::PerfMapAge> perf_map_ages(const std::vector<PerfMapFact>& perf_maps,
                                             const profile::SymbolizedProfile& interval)
{
  std::unordered_map<uint32_t, std::string> targets;
  for (const auto& stack : interval.stacks)
    targets.try_emplace(stack.pid, stack.target);
  std::vector<dumps::PerfMapAge> ages;
  auto now = dumps::Clock::now();
  for (const auto& map : perf_maps) {
    auto target = targets.find(map.pid);
    if (target == targets.end())
      continue;
    std::chrono::duration<double> age = now - map.modified;
    ages.push_back({map.pid, target->second, age.count()});
  }
  return ages;
}

} // namespace

StatsSink::StatsSink(std::shared_ptr<dumps::DumpWriter> writer,
                     std::chrono::nanoseconds interval,
                     std::shared_ptr<const MemoryAccount> memory)
    : writer_(std::move(writer)), interval_(interval), memory_(std::move(memory))
{
}

void StatsSink::started()
{
  usage_before_ = dumps::own_usage();
}

Result<> StatsSink::consume(const profile::SymbolizedProfile& interval, IntervalFacts& facts)
{
  dumps::IntervalStats stats;
  stats.window = facts.window;
  stats.profile = &interval;
  stats.perf_maps = perf_map_ages(facts.perf_maps, interval);
  stats.coverage = facts.coverage;
  stats.usage = dumps::own_usage();
  stats.occupancy = facts.occupancy;
  if (memory_)
    stats.memory = memory_->breakdown();
  stats.interval_cpu_seconds = stats.usage.cpu_seconds - usage_before_.cpu_seconds;
  usage_before_ = stats.usage;
  if (facts.dumps) {
    stats.files_written = facts.dumps->files;
    stats.dumps_pending = facts.dumps->pending;
  }
  spdlog::info("{}", dumps::summary_line(stats));
  auto appended = writer_->append_stats(dumps::stats_json(stats));
  // A stats file that stays unwritable (a FIFO in its place) is said once, not every interval;
  // nor while the dumps cannot be written either (a full disk): their line says so.
  bool dumps_failed = facts.dumps && !facts.dumps->error.empty();
  if (!appended && !dumps_failed && appended.error().message != stats_failure_)
    spdlog::error("{}", appended.error().message);
  stats_failure_ = appended ? "" : appended.error().message;
  facts.stats = std::move(stats);
  return {};
}

} // namespace flamebpf::pipeline
