#include "dumps/metrics.h"

#include <chrono>
#include <fmt/format.h>
#include <tuple>

#include "common/utf8.h"
#include "profile/drop_report.h"

namespace flamebpf::dumps {
namespace {

// One metric's HELP and TYPE lines.
void describe(std::string& out, std::string_view name, std::string_view type, std::string_view help)
{
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

// {name="value",...} of the labels that have a value; empty if none has.
std::string labels(std::initializer_list<std::pair<std::string_view, std::string_view>> pairs)
{
  std::string out;
  for (const auto& [name, value] : pairs) {
    if (value.empty())
      continue;
    out += out.empty() ? "{" : ",";
    out += fmt::format("{}=\"{}\"", name, label_value(value));
  }
  return out.empty() ? out : out + "}";
}

std::string_view target_label(const std::string& target)
{
  return target.empty() ? "host" : std::string_view(target);
}

} // namespace

std::string label_value(std::string_view value)
{
  std::string valid = utf8::valid(value);
  std::string out;
  out.reserve(valid.size());
  for (char c : valid) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

void Metrics::add(const IntervalStats& stats)
{
  const profile::SymbolizedProfile& profile = *stats.profile;
  ++intervals_;
  for (const auto& stack : profile.stacks) {
    auto& totals = targets_[stack.target];
    totals.samples += stack.count;
    totals.last_interval = intervals_;
  }
  for (const auto& coverage : stats.coverage) {
    auto& totals = targets_[coverage.target];
    totals.cpu_seconds += coverage.cpu_seconds;
    totals.whole_samples += coverage.whole_samples;
    totals.last_interval = intervals_;
  }
  for (auto& [name, totals] : targets_) {
    if (auto found = profile.target_labels.find(name); found != profile.target_labels.end())
      totals.labels = found->second;
  }
  // Containers come and go: a target without samples for a while is forgotten (its counter
  // starts again from 0 if it comes back, as Prometheus expects of a restarted counter).
  std::erase_if(targets_, [&](const auto& entry) {
    return intervals_ - entry.second.last_interval >= kForgetAfterIntervals;
  });
  for (const auto& [counter, name] : drop_kinds())
    drops_[name] += profile.counters[counter];
  frames_ += profile.symbolize_stats;
  files_written_ += stats.files_written;
  last_ = stats;
  last_.profile = nullptr;
  node_ = profile.node;
  std::string text = render();
  std::lock_guard lock(mutex_);
  text_ = std::move(text);
}

std::string Metrics::text() const
{
  std::lock_guard lock(mutex_);
  return text_;
}

std::string Metrics::render() const
{
  std::string out;
  auto target_labels = [](const std::string& name, const TargetTotals& totals) {
    const auto& tags = totals.labels;
    return labels({{"target", target_label(name)},
                   {"container", tags.container},
                   {"container_id", tags.container_id},
                   {"namespace", tags.namespace_name},
                   {"pod", tags.pod}});
  };
  // A counter with a line for each target, its value as value_of gives it.
  auto per_target_counter = [&](std::string_view metric, std::string_view help, auto value_of) {
    describe(out, metric, "counter", help);
    for (const auto& [name, totals] : targets_)
      out += fmt::format("{}{} {}\n", metric, target_labels(name, totals), value_of(totals));
  };
  per_target_counter("flamebpf_samples_total",
                     "Samples taken of each target (host: of no target), since flamebpf started.",
                     [](const TargetTotals& totals) { return totals.samples; });
  per_target_counter("flamebpf_whole_samples_total",
                     "Samples of each target kept whole (no stack lost or cut short, every frame "
                     "named), over the intervals its CPU time was measured.",
                     [](const TargetTotals& totals) { return totals.whole_samples; });
  per_target_counter(
      "flamebpf_target_cpu_seconds_total",
      "CPU time the kernel accounted to each target (its cgroup's cpu.stat, or its process's "
      "stat), over the intervals it was measured.",
      [](const TargetTotals& totals) { return fmt::format("{:.6f}", totals.cpu_seconds); });
  describe(out, "flamebpf_coverage_ratio", "gauge",
           "Each target's whole samples over the samples its CPU time stands for at the sampling "
           "frequency, in the last interval; targets with too little CPU time to judge are left "
           "out.");
  for (const auto& coverage : last_.coverage) {
    if (!profile::judged(coverage))
      continue;
    auto totals = targets_.find(coverage.target);
    out +=
        fmt::format("flamebpf_coverage_ratio{} {:.4f}\n",
                    totals == targets_.end() ? labels({{"target", target_label(coverage.target)}})
                                             : target_labels(coverage.target, totals->second),
                    coverage.coverage);
  }
  describe(out, "flamebpf_coverage_shortfall_ratio", "gauge",
           "What each kind of shortfall cost each target in the last interval, as a share of the "
           "samples its CPU time stands for.");
  for (const auto& coverage : last_.coverage) {
    if (!profile::judged(coverage))
      continue;
    for (const auto& [reason, samples] :
         {std::pair{profile::Shortfall::kDrops, coverage.drops},
          std::pair{profile::Shortfall::kUnwinding, coverage.unwinding},
          std::pair{profile::Shortfall::kNaming, coverage.naming},
          std::pair{profile::Shortfall::kSamplingRate, coverage.sampling}})
      out += fmt::format("flamebpf_coverage_shortfall_ratio{} {:.4f}\n",
                         labels({{"target", target_label(coverage.target)},
                                 {"reason", profile::shortfall_name(reason)}}),
                         samples / coverage.expected_samples);
  }
  describe(out, "flamebpf_dropped_samples_total", "counter",
           "Samples whose stack or count was lost, by why.");
  for (const auto& [kind, count] : drops_)
    out += fmt::format("flamebpf_dropped_samples_total{} {}\n", labels({{"kind", kind}}), count);
  // Each family's samples together after its TYPE, as the text format has them.
  auto by_code = {std::tuple{"native", frames_.native_frames, frames_.native_unnamed},
                  std::tuple{"jit", frames_.jit_frames, frames_.jit_unnamed}};
  describe(out, "flamebpf_user_frames_total", "counter",
           "User frames symbolized, by where the code was: in an ELF file (native) or JIT code.");
  for (const auto& [code, frames, unnamed] : by_code)
    out += fmt::format("flamebpf_user_frames_total{{code=\"{}\"}} {}\n", code, frames);
  describe(out, "flamebpf_unnamed_user_frames_total", "counter",
           "User frames no symbol or perf map named, by where the code was.");
  for (const auto& [code, frames, unnamed] : by_code)
    out += fmt::format("flamebpf_unnamed_user_frames_total{{code=\"{}\"}} {}\n", code, unnamed);
  describe(out, "flamebpf_truncated_names_total", "counter",
           "Frame names a budget cut short (they end in [truncated]).");
  out += fmt::format("flamebpf_truncated_names_total {}\n", frames_.truncated_names);
  describe(out, "flamebpf_perf_map_age_seconds", "gauge",
           "Time since each sampled JIT last wrote its perf map, at the last interval's end.");
  for (const auto& map : last_.perf_maps)
    out += fmt::format(
        "flamebpf_perf_map_age_seconds{} {:.1f}\n",
        labels({{"target", target_label(map.target)}, {"pid", std::to_string(map.pid)}}),
        map.age_seconds);
  describe(out, "flamebpf_cpu_seconds_total", "counter",
           "flamebpf's own CPU time, user and system.");
  out += fmt::format("flamebpf_cpu_seconds_total {:.3f}\n", last_.usage.cpu_seconds);
  describe(out, "flamebpf_resident_memory_bytes", "gauge", "flamebpf's resident memory.");
  out += fmt::format("flamebpf_resident_memory_bytes {}\n", last_.usage.rss_bytes);
  describe(out, "flamebpf_anonymous_memory_bytes", "gauge",
           "flamebpf's anonymous resident memory (heap and stacks).");
  out += fmt::format("flamebpf_anonymous_memory_bytes {}\n", last_.usage.rss_anon_bytes);
  describe(out, "flamebpf_memory_bytes", "gauge",
           "What flamebpf holds in userspace, by kind: what targets made it hold (symbols, "
           "inlines, perf_maps, jvm_records, python_code), its own (unwind_tables, "
           "container_names, dumps, "
           "answers, intervals), and the rest of its heap (other: allocated; heap_free: kept "
           "free by the allocator). The kernel maps are not in it.");
  for (MemoryKind kind : kAllMemoryKinds)
    out += fmt::format("flamebpf_memory_bytes{} {}\n", labels({{"kind", memory_kind_name(kind)}}),
                       last_.memory.of(kind));
  describe(out, "flamebpf_memory_accounted_bytes", "gauge",
           "The sum of flamebpf_memory_bytes over its kinds.");
  out += fmt::format("flamebpf_memory_accounted_bytes {}\n", last_.memory.total());
  describe(out, "flamebpf_open_fds", "gauge", "File descriptors flamebpf holds open.");
  out += fmt::format("flamebpf_open_fds {}\n", last_.usage.open_fds);
  describe(out, "flamebpf_intervals_total", "counter", "Intervals recorded.");
  out += fmt::format("flamebpf_intervals_total{} {}\n", labels({{"node", node_}}), intervals_);
  describe(out, "flamebpf_last_interval_end_seconds", "gauge",
           "When the last interval ended, in seconds since the epoch.");
  out += fmt::format("flamebpf_last_interval_end_seconds {:.3f}\n",
                     std::chrono::duration<double>(last_.window.end.time_since_epoch()).count());
  describe(out, "flamebpf_dump_files_written_total", "counter", "Dump files written.");
  out += fmt::format("flamebpf_dump_files_written_total {}\n", files_written_);
  describe(out, "flamebpf_dumps_pending", "gauge",
           "Intervals whose dumps wait in memory for the disk to take them.");
  out += fmt::format("flamebpf_dumps_pending {}\n", last_.dumps_pending);
  return out;
}

} // namespace flamebpf::dumps
