#include "pipeline/sinks.h"

#include "pipeline/dump_sink.h"
#include "pipeline/profile_file_sink.h"
#include "pipeline/serve_sink.h"
#include "pipeline/stats_sink.h"
#include "pipeline/top_sink.h"

namespace flamebpf::pipeline {

std::optional<std::chrono::nanoseconds> SinkList::interval() const
{
  for (const auto& sink : sinks_) {
    if (auto length = sink->interval())
      return length;
  }
  return std::nullopt;
}

void SinkList::targets_added(const std::vector<target::Target>& added)
{
  for (const auto& sink : sinks_)
    sink->targets_added(added);
}

void SinkList::targets_removed(const std::vector<target::Target>& removed)
{
  for (const auto& sink : sinks_)
    sink->targets_removed(removed);
}

void SinkList::started()
{
  for (const auto& sink : sinks_)
    sink->started();
}

void SinkList::drained(const profile::SymbolizedProfile& part)
{
  for (const auto& sink : sinks_)
    sink->drained(part);
}

std::optional<std::chrono::steady_clock::time_point> SinkList::drain_wanted_by() const
{
  std::optional<std::chrono::steady_clock::time_point> soonest;
  for (const auto& sink : sinks_) {
    auto wanted = sink->drain_wanted_by();
    if (wanted && (!soonest || *wanted < *soonest))
      soonest = wanted;
  }
  return soonest;
}

Result<> SinkList::consume(const profile::SymbolizedProfile& interval, IntervalFacts facts)
{
  for (const auto& sink : sinks_) {
    if (auto consumed = sink->consume(interval, facts); !consumed)
      return consumed;
  }
  return {};
}

Result<> SinkList::finish(RecordSummary& summary)
{
  Result<> first_failure;
  for (const auto& sink : sinks_) {
    if (auto finished = sink->finish(summary); !finished && first_failure)
      first_failure = std::move(finished);
  }
  return first_failure;
}

Result<SinkList> open_sinks(const cli::Config& config,
                            const target::TargetSet& targets,
                            const std::shared_ptr<MemoryAccount>& memory)
{
  std::vector<std::unique_ptr<IntervalSink>> sinks;
  if (config.mode == cli::Mode::kTop) {
    sinks.push_back(std::make_unique<TopSink>(config));
  } else if (!config.output_dir.empty()) {
    auto dumps = DumpSink::open(config, memory);
    if (!dumps)
      return fail(dumps.error());
    auto writer = (*dumps)->writer();
    auto interval = *(*dumps)->interval();
    sinks.push_back(std::move(*dumps));
    sinks.push_back(std::make_unique<StatsSink>(std::move(writer), interval, memory));
    if (!config.listen.empty()) {
      auto served = ServeSink::open(config, interval, memory);
      if (!served)
        return fail(served.error());
      sinks.push_back(std::move(*served));
    }
  } else {
    auto files = ProfileFileSink::open(config, targets.per_target_output());
    if (!files)
      return fail(files.error());
    sinks.push_back(std::move(*files));
  }
  return SinkList(std::move(sinks));
}

} // namespace flamebpf::pipeline
