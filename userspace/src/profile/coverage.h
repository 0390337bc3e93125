// Whether a profile adds up. For each target, the CPU time its samples stand for (samples over the
// sampling frequency) is set against the CPU time the kernel accounted to it over the same time,
// and each sample is judged whole or not: whole when neither of its stacks was lost, the unwinder
// reached the root (nothing cut it short) and every frame is named. A target's coverage is its
// whole samples over the samples its CPU time stands for: near 1, the profile is all of the
// target's CPU time, every stack complete and named; below, the largest shortfall says why.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "profile/symbolized_profile.h"

namespace flamebpf::profile {

// Why a target's whole samples fall short of its CPU time.
enum class Shortfall : uint8_t {
  kDrops,        // samples, or their stacks, the kernel could not keep
  kUnwinding,    // stacks cut short before their root
  kNaming,       // stacks with a frame that no symbol, debug file or map named
  kSamplingRate, // fewer samples than the CPU time at the frequency stands for, none lost
};

// Below this coverage, a target's profile falls short and the log says why.
inline constexpr double kLowCoverage = 0.9;

// A target whose CPU time stands for fewer samples than this over an interval is not judged: an
// idle target's 2 samples out of an expected 3 are chance, not a shortfall.
inline constexpr double kMinJudgedSamples = 20;

// One target's coverage over an interval.
struct TargetCoverage {
  std::string target;          // its name, as its samples carry it
  double cpu_seconds = 0;      // CPU time the kernel accounted to it over the interval
  double expected_samples = 0; // what cpu_seconds stands for at the profile's frequency
  uint64_t samples = 0;        // its samples in the profile
  uint64_t whole_samples = 0;  // of those, whole
  // What each kind of shortfall cost, in samples; they and whole_samples add up to
  // expected_samples when it is not below the samples taken.
  double drops = 0;     // lost stacks, and the interval's samples the kernel lost with their count
  double unwinding = 0; // samples whose stack was cut short (and not lost)
  double naming = 0;    // samples with an unnamed frame (and whole stacks)
  double sampling = 0;  // samples the CPU time stands for that were neither taken nor lost
  double coverage = 0;  // whole_samples / expected_samples; 0 when nothing was expected
  Shortfall reason = Shortfall::kSamplingRate; // the largest of the four shortfalls
};

// The coverage of each target of cpu_seconds (by target name: the CPU time each used over the
// profile's interval), in name order; empty when the profile has no frequency. Samples the kernel
// lost with their count (a full count map) are known for the whole interval only: each target's
// shortfall of samples is taken to be those, as far as they go, before the sampling rate.
std::vector<TargetCoverage> measure_coverage(const SymbolizedProfile& profile,
                                             const std::map<std::string, double>& cpu_seconds);

// The entries of coverage of target only (none or one), for a profile split by target.
std::vector<TargetCoverage> coverage_of(const std::vector<TargetCoverage>& coverage,
                                        std::string_view target);

// Whether enough samples were expected to judge the coverage (kMinJudgedSamples).
bool judged(const TargetCoverage& coverage);

// Whether the target was judged and its coverage is below kLowCoverage.
bool falls_short(const TargetCoverage& coverage);

// The reason as the stats file and the metrics name it: "drops", "unwinding", "naming",
// "sampling_rate".
std::string_view shortfall_name(Shortfall reason);

// "98%", or "62% (naming)" for a coverage that falls short; "-" when not judged.
std::string coverage_text(const TargetCoverage& coverage);

// Every target's coverage on one line: "coverage 98%" for one target, "coverage web 98%, db 62%
// (naming)" for a few, "coverage of 12 targets: 11 ≥ 90%, db 62% (naming)" for more (those that
// fall short named); empty when no target has any.
std::string coverage_summary(const std::vector<TargetCoverage>& coverage);

// The warning for a target whose coverage falls short: how much of its CPU time the profile
// covers, the largest shortfall and what to do about it, on one line.
std::string coverage_warning(const TargetCoverage& coverage, uint32_t frequency_hz);

} // namespace flamebpf::profile
