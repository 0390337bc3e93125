#include "pipeline/schedule.h"

#include <algorithm>

namespace flamebpf::pipeline {
namespace {

// How early by the wall clock a drain scheduled for the end of an interval may wake and still end
// it: the steady clock it waits on and the wall clock drift apart by a little.
constexpr auto kEndTolerance = std::chrono::milliseconds(5);

} // namespace

Schedule::Steady::duration max_drain_period(uint32_t frequency_hz)
{
  constexpr uint64_t kSamplesPerCpu = 2 * 99;
  constexpr Schedule::Steady::duration kShortest = std::chrono::seconds(2);
  constexpr Schedule::Steady::duration kLongest = std::chrono::seconds(10);
  if (frequency_hz == 0)
    return kShortest;
  Schedule::Steady::duration period =
      std::chrono::milliseconds(kSamplesPerCpu * 1000 / frequency_hz);
  return std::clamp(period, kShortest, kLongest);
}

Schedule::Wall::time_point next_boundary(Schedule::Wall::time_point now,
                                         std::chrono::nanoseconds interval)
{
  auto since = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch());
  auto periods = since / interval + 1;
  return Schedule::Wall::time_point(
      std::chrono::duration_cast<Schedule::Wall::duration>(periods * interval));
}

Schedule::Schedule(const Options& options, Steady::time_point steady_now, Wall::time_point wall_now)
    : interval_(options.interval),
      drain_period_(options.interval ? std::min({options.drain_period, *options.interval,
                                                 options.max_drain_period})
                                     : options.drain_period),
      perf_map_period_(options.perf_map_period), next_periodic_drain_(steady_now + drain_period_),
      next_perf_map_read_(steady_now + perf_map_period_)
{
  if (options.duration)
    deadline_ = steady_now + *options.duration;
  if (interval_)
    interval_end_ = next_boundary(wall_now, *interval_);
  next_drain_ = next_drain(steady_now, wall_now);
}

void Schedule::perf_maps_read(Steady::time_point now)
{
  next_perf_map_read_ = now + perf_map_period_;
}

void Schedule::drained(Steady::time_point steady_now, Wall::time_point wall_now)
{
  if (!extra_drain_ || steady_now >= next_periodic_drain_)
    next_periodic_drain_ = std::max(next_periodic_drain_ + drain_period_, steady_now);
  extra_drain_ = false;
  next_drain_ = next_drain(steady_now, wall_now);
}

void Schedule::drain_by(Steady::time_point when)
{
  if (when < next_drain_) {
    next_drain_ = when;
    extra_drain_ = true;
  }
}

bool Schedule::ends_interval(Wall::time_point wall_now) const
{
  return interval_ && wall_now + kEndTolerance >= interval_end_;
}

void Schedule::interval_ended(Wall::time_point wall_now)
{
  // Strictly after the end just reached, even when the drain woke a hair before it: the same end
  // again would give an empty interval at once.
  if (interval_)
    interval_end_ = next_boundary(std::max(interval_end_, wall_now), *interval_);
}

Schedule::Steady::time_point Schedule::next_wake() const
{
  auto wake = std::min(next_drain_, next_perf_map_read_);
  return deadline_ ? std::min(wake, *deadline_) : wake;
}

Schedule::Steady::time_point Schedule::next_drain(Steady::time_point steady_now,
                                                  Wall::time_point wall_now) const
{
  if (!interval_)
    return next_periodic_drain_;
  auto until_end = std::chrono::duration_cast<Steady::duration>(interval_end_ - wall_now);
  return std::min(next_periodic_drain_, steady_now + until_end);
}

} // namespace flamebpf::pipeline
