#include "pipeline/profile_file_sink.h"

#include "pipeline/outputs.h"
#include "profile/by_target.h"
#include "profile/drop_report.h"

namespace flamebpf::pipeline {
namespace {

uint64_t process_count(const profile::SymbolizedProfile& profile)
{
  std::set<uint32_t> pids;
  for (const auto& stack : profile.stacks)
    pids.insert(stack.pid);
  return pids.size();
}

} // namespace

Result<std::unique_ptr<ProfileFileSink>> ProfileFileSink::open(const cli::Config& config,
                                                               bool per_target)
{
  // Without -o: the folded file and its flame graph beside it.
  std::vector<std::string> outputs{config.output};
  if (config.output.empty()) {
    std::string folded = default_output_path();
    outputs = {folded, folded.substr(0, folded.size() - 7) + ".svg"};
  }
  // Split files are named after targets yet unknown: they are checked when written.
  if (!per_target) {
    for (const auto& output : outputs) {
      if (output == "-")
        continue;
      if (auto writable = check_output_path(output); !writable)
        return fail(usage_error(writable.error().message));
    }
  }
  return std::unique_ptr<ProfileFileSink>(
      new ProfileFileSink(config, std::move(outputs), per_target));
}

ProfileFileSink::ProfileFileSink(const cli::Config& config,
                                 std::vector<std::string> outputs,
                                 bool per_target)
    : graph_(config.graph), outputs_(std::move(outputs)), per_target_(per_target)
{
  graph_.target_frame = config.target_frame;
}

void ProfileFileSink::targets_added(const std::vector<target::Target>& added)
{
  for (const auto& target : added)
    target_names_.insert(target.name);
}

Result<> ProfileFileSink::consume(const profile::SymbolizedProfile& interval, IntervalFacts& facts)
{
  auto parts = profile::split_by_target(interval);
  for (const auto& name : target_names_)
    parts.try_emplace(name);
  std::set<std::string> names;
  for (const auto& [name, part] : parts)
    names.insert(name);
  auto file_names = profile::target_file_names(names);
  uint64_t processes = process_count(interval);
  for (const auto& output : outputs_) {
    if (!per_target_ || output == "-") {
      // Several targets in one stream stay apart only with their names as root frames.
      emit::SvgOptions graph = graph_;
      graph.target_frame = graph_.target_frame || per_target_;
      graph.subtitle = emit::describe_profile(interval, facts.coverage);
      if (auto written = write_profile(output, interval, graph); !written)
        return fail(written.error());
      summary_.outputs.push_back({output, interval.total_samples(), processes});
      continue;
    }
    for (const auto& [name, part] : parts) {
      std::string path = output_path_for_target(output, file_names.at(name));
      emit::SvgOptions graph = graph_;
      graph.subtitle = emit::describe_profile(part, profile::coverage_of(facts.coverage, name));
      if (auto written = write_profile(path, part, graph); !written)
        return fail(written.error());
      summary_.outputs.push_back({path, part.total_samples(), process_count(part)});
    }
  }
  summary_.samples += interval.total_samples();
  summary_.processes = processes;
  summary_.drops += profile::total_drops(interval.counters);
  return {};
}

Result<> ProfileFileSink::finish(RecordSummary& summary)
{
  summary.outputs = std::move(summary_.outputs);
  summary.samples = summary_.samples;
  summary.processes = summary_.processes;
  summary.drops = summary_.drops;
  summary.targets = target_names_.size();
  return {};
}

} // namespace flamebpf::pipeline
