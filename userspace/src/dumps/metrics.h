// Agent mode's statistics in Prometheus' text format (version 0.0.4), as --listen serves them at
// /metrics: counters over the whole run (samples, whole samples and CPU time by target, drops by
// kind, frames and unnamed frames by where the code was, flamebpf's CPU time) and gauges of the
// last interval (each target's coverage and its shortfalls, perf map ages, memory, open files),
// each target's samples labelled as pprof labels them.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "dumps/stats.h"

namespace flamebpf::dumps {

class Metrics {
public:
  // A target with no sample for this many intervals is no longer listed.
  static constexpr uint64_t kForgetAfterIntervals = 60;

  // After each interval, from the same statistics the stats file gets.
  void add(const IntervalStats& stats);
  // The text of the last add(); thread-safe.
  std::string text() const;

private:
  std::string render() const;

  struct TargetTotals {
    uint64_t samples = 0;
    uint64_t last_interval = 0; // the last with samples, or with its CPU time measured
    double cpu_seconds = 0;     // CPU time the kernel accounted while it was measured
    uint64_t whole_samples = 0; // samples kept whole while it was measured (profile/coverage.h)
    profile::TargetLabels labels;
  };
  std::map<std::string, TargetTotals> targets_; // by name; "" is the host
  std::map<std::string, uint64_t> drops_;       // by kind
  profile::SymbolizeStats frames_;
  uint64_t intervals_ = 0;
  uint64_t files_written_ = 0;
  IntervalStats last_; // its profile pointer is not kept
  std::string node_;
  mutable std::mutex mutex_;
  std::string text_;
};

// value as a label value: valid UTF-8, with \, " and newlines escaped.
std::string label_value(std::string_view value);

} // namespace flamebpf::dumps
