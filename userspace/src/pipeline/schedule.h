// When the recorder's loop does what: drain the kernel's maps, end an interval, read JITs' perf
// maps, stop a bounded recording. Plain arithmetic on the times it is given (the recorder reads
// the clocks), so that it can be tested without waiting.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace flamebpf::pipeline {

class Schedule {
public:
  using Steady = std::chrono::steady_clock;
  using Wall = std::chrono::system_clock;

  struct Options {
    Steady::duration drain_period = std::chrono::seconds(2); // between drains of the kernel
    // With intervals, the kernel's maps are drained at least this often whatever the interval,
    // the window added up in memory: they then hold seconds of distinct stacks, not a minute's.
    Steady::duration max_drain_period = std::chrono::seconds(2);
    // Set: intervals end at wall-clock multiples of it, so that every interval's window is one,
    // each at a drain. None: the whole recording is one interval.
    std::optional<Steady::duration> interval;
    std::optional<Steady::duration> duration; // set: the recording stops this long after the start
    Steady::duration perf_map_period = std::chrono::milliseconds(250); // between perf-map reads
  };

  // A schedule that starts at steady_now, which is wall_now by the wall clock.
  Schedule(const Options& options, Steady::time_point steady_now, Wall::time_point wall_now);

  // Whether a bounded recording's time is up.
  bool finished(Steady::time_point now) const { return deadline_ && now >= *deadline_; }

  // Whether the JITs' perf maps are due to be read; perf_maps_read() once they were, at now.
  bool perf_maps_due(Steady::time_point now) const { return now >= next_perf_map_read_; }
  void perf_maps_read(Steady::time_point now);

  // Whether the kernel's maps are due to be drained; drained() once they were, at steady_now
  // (which is wall_now by the wall clock).
  bool drain_due(Steady::time_point now) const { return now >= next_drain_; }
  void drained(Steady::time_point steady_now, Wall::time_point wall_now);
  // A drain wanted by when, if sooner than the schedule's own; it leaves the periodic drains
  // where they were.
  void drain_by(Steady::time_point when);

  // Whether the drain due at wall_now ends the interval: it is at the interval's end, or a hair
  // before it (a drain scheduled for the end may wake early by the wall clock).
  bool ends_interval(Wall::time_point wall_now) const;
  // The wall-clock end of the current interval (with intervals).
  Wall::time_point interval_end() const { return interval_end_; }
  // Moves on to the next interval, ended at wall_now: after a stall (a suspended machine), the
  // next wall-clock multiple, not every one missed.
  void interval_ended(Wall::time_point wall_now);

  // When the loop has something to do next: a drain, a perf-map read or the end.
  Steady::time_point next_wake() const;

private:
  // The next drain: the periodic one, or the end of the interval if that comes first.
  Steady::time_point next_drain(Steady::time_point steady_now, Wall::time_point wall_now) const;

  std::optional<Steady::duration> interval_;
  Steady::duration drain_period_;
  Steady::duration perf_map_period_;
  std::optional<Steady::time_point> deadline_;
  Wall::time_point interval_end_{}; // with intervals
  Steady::time_point next_periodic_drain_;
  Steady::time_point next_drain_;
  bool extra_drain_ = false; // next_drain_ was brought forward by drain_by()
  Steady::time_point next_perf_map_read_;
};

// The longest drain period at a sampling frequency: the kernel's maps then hold about as many
// samples per CPU (2 s at 99 Hz) whatever the frequency, and at a low one the work each drain
// does (every process checked, every image's unwinding misses read) is done less often. At most
// 10 s, so that a process that runs for seconds is named while it lives.
Schedule::Steady::duration max_drain_period(uint32_t frequency_hz);

// The first wall-clock multiple of interval strictly after now: where an interval ends.
Schedule::Wall::time_point next_boundary(Schedule::Wall::time_point now,
                                         std::chrono::nanoseconds interval);

} // namespace flamebpf::pipeline
