#include "profile/coverage.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace flamebpf::profile {
namespace {

struct SampleCounts {
  uint64_t samples = 0;
  uint64_t lost = 0;
  uint64_t cut = 0;
  uint64_t unnamed = 0;
};

bool has_unnamed_frame(const Stack& stack)
{
  return std::any_of(stack.frames.begin(), stack.frames.end(),
                     [](const Frame& frame) { return frame.kind == FrameKind::kUnknown; });
}

// Samples of no target are the host's.
std::string_view shown_name(const TargetCoverage& coverage)
{
  return coverage.target.empty() ? "host" : std::string_view(coverage.target);
}

std::string percent(double share)
{
  return fmt::format("{:.0f}%", 100 * share);
}

// How a shortfall reads in the warning, with what avoids it.
std::string explain(Shortfall reason, uint32_t frequency_hz)
{
  switch (reason) {
  case Shortfall::kDrops:
    return "drops: the kernel could not keep some samples or their stacks (raise --stack-storage "
           "or --count-storage)";
  case Shortfall::kUnwinding:
    return "unwinding: stacks were cut short before their root (code without frame pointers or "
           "unwind tables, or stacks deeper than flamebpf follows)";
  case Shortfall::kNaming:
    return "naming: frames were left unnamed (binaries without symbols: install their debug files "
           "or give --debuginfod)";
  case Shortfall::kSamplingRate:
    break;
  }
  return fmt::format("sampling rate: fewer samples than its CPU time at {} Hz stands for, none "
                     "of them lost (the kernel throttled sampling, or some of its processes were "
                     "outside the filter)",
                     frequency_hz);
}

} // namespace

std::vector<TargetCoverage> measure_coverage(const SymbolizedProfile& profile,
                                             const std::map<std::string, double>& cpu_seconds)
{
  std::vector<TargetCoverage> out;
  if (profile.frequency_hz == 0)
    return out;
  std::map<std::string, SampleCounts> counts;
  for (const auto& stack : profile.stacks) {
    if (!cpu_seconds.contains(stack.target))
      continue;
    SampleCounts& target = counts[stack.target];
    // A sample is short for one reason, the first that applies: lost, cut, unnamed.
    uint64_t lost = std::min(stack.lost_samples, stack.count);
    uint64_t cut = std::min(stack.cut_samples, stack.count - lost);
    target.samples += stack.count;
    target.lost += lost;
    target.cut += cut;
    if (has_unnamed_frame(stack))
      target.unnamed += stack.count - lost - cut;
  }
  double counts_lost = static_cast<double>(profile.counters[FB_COUNTER_COUNT_MAP_FULL] +
                                           profile.counters[FB_COUNTER_TARGET_SHARE_FULL]);
  for (const auto& [name, seconds] : cpu_seconds) {
    const SampleCounts& taken = counts[name];
    TargetCoverage coverage;
    coverage.target = name;
    coverage.cpu_seconds = std::max(seconds, 0.0);
    coverage.expected_samples = coverage.cpu_seconds * profile.frequency_hz;
    coverage.samples = taken.samples;
    coverage.whole_samples = taken.samples - taken.lost - taken.cut - taken.unnamed;
    double missing =
        std::max(0.0, coverage.expected_samples - static_cast<double>(coverage.samples));
    double missing_lost = std::min(missing, counts_lost);
    coverage.drops = static_cast<double>(taken.lost) + missing_lost;
    coverage.unwinding = static_cast<double>(taken.cut);
    coverage.naming = static_cast<double>(taken.unnamed);
    coverage.sampling = missing - missing_lost;
    if (coverage.expected_samples > 0)
      coverage.coverage = static_cast<double>(coverage.whole_samples) / coverage.expected_samples;
    // Ties go to the first: what the kernel lost is said before what followed from it.
    std::pair<double, Shortfall> largest{coverage.drops, Shortfall::kDrops};
    for (auto shortfall : {std::pair{coverage.unwinding, Shortfall::kUnwinding},
                           std::pair{coverage.naming, Shortfall::kNaming},
                           std::pair{coverage.sampling, Shortfall::kSamplingRate}}) {
      if (shortfall.first > largest.first)
        largest = shortfall;
    }
    coverage.reason = largest.second;
    out.push_back(std::move(coverage));
  }
  return out;
}

std::vector<TargetCoverage> coverage_of(const std::vector<TargetCoverage>& coverage,
                                        std::string_view target)
{
  std::vector<TargetCoverage> out;
  for (const auto& entry : coverage) {
    if (entry.target == target)
      out.push_back(entry);
  }
  return out;
}

bool judged(const TargetCoverage& coverage)
{
  return coverage.expected_samples >= kMinJudgedSamples;
}

bool falls_short(const TargetCoverage& coverage)
{
  return judged(coverage) && coverage.coverage < kLowCoverage;
}

std::string_view shortfall_name(Shortfall reason)
{
  switch (reason) {
  case Shortfall::kDrops:
    return "drops";
  case Shortfall::kUnwinding:
    return "unwinding";
  case Shortfall::kNaming:
    return "naming";
  case Shortfall::kSamplingRate:
    break;
  }
  return "sampling_rate";
}

std::string coverage_text(const TargetCoverage& coverage)
{
  if (!judged(coverage))
    return "-";
  std::string text = percent(coverage.coverage);
  if (falls_short(coverage))
    text += fmt::format(" ({})", shortfall_name(coverage.reason));
  return text;
}

std::string coverage_summary(const std::vector<TargetCoverage>& coverage)
{
  // A few targets are each named; of more, those that fall short.
  constexpr size_t kNamedTargets = 4;
  if (coverage.empty())
    return "";
  if (coverage.size() == 1)
    return "coverage " + coverage_text(coverage.front());
  std::string line = "coverage";
  if (coverage.size() <= kNamedTargets) {
    const char* separator = " ";
    for (const auto& target : coverage) {
      line += fmt::format("{}{} {}", separator, shown_name(target), coverage_text(target));
      separator = ", ";
    }
    return line;
  }
  size_t full = std::count_if(coverage.begin(), coverage.end(), [](const TargetCoverage& target) {
    return judged(target) && !falls_short(target);
  });
  line += fmt::format(" of {} targets: {} \xE2\x89\xA5 {}", coverage.size(), full,
                      percent(kLowCoverage));
  for (const auto& target : coverage) {
    if (falls_short(target))
      line += fmt::format(", {} {}", shown_name(target), coverage_text(target));
  }
  return line;
}

std::string coverage_warning(const TargetCoverage& coverage, uint32_t frequency_hz)
{
  double expected = std::max(coverage.expected_samples, 1.0);
  double shortfall = 0;
  switch (coverage.reason) {
  case Shortfall::kDrops:
    shortfall = coverage.drops;
    break;
  case Shortfall::kUnwinding:
    shortfall = coverage.unwinding;
    break;
  case Shortfall::kNaming:
    shortfall = coverage.naming;
    break;
  case Shortfall::kSamplingRate:
    shortfall = coverage.sampling;
    break;
  }
  return fmt::format("target {}: its profile covers {} of the {:.2f} CPU-seconds it used ({} whole "
                     "samples of {:.0f}); the largest shortfall, {} of them, is {}",
                     shown_name(coverage), percent(coverage.coverage), coverage.cpu_seconds,
                     coverage.whole_samples, coverage.expected_samples,
                     percent(shortfall / expected), explain(coverage.reason, frequency_hz));
}

} // namespace flamebpf::profile
