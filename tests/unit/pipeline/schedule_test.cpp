#include <gtest/gtest.h>

#include "pipeline/schedule.h"

namespace flamebpf::pipeline {
namespace {

using namespace std::chrono_literals;
using Steady = Schedule::Steady;
using Wall = Schedule::Wall;

Wall::time_point at(int64_t seconds, int64_t millis = 0)
{
  return Wall::time_point(std::chrono::seconds(seconds) + std::chrono::milliseconds(millis));
}

// 2026-11-22T16:20:00Z
constexpr int64_t kT = 1795364400;

// A steady clock reading, as an offset from an arbitrary start.
Steady::time_point steady(Steady::duration since_start)
{
  return Steady::time_point(1000s) + since_start;
}

// Drains every drain_period, with intervals of interval if set, perf maps read every 250 ms.
Schedule::Options options(Steady::duration drain_period,
                          std::optional<Steady::duration> interval = std::nullopt)
{
  Schedule::Options options;
  options.drain_period = drain_period;
  options.interval = interval;
  return options;
}

TEST(NextBoundary, WallClockMultiplesOfTheInterval)
{
  EXPECT_EQ(next_boundary(at(kT + 7), 60s), at(kT + 60));
  EXPECT_EQ(next_boundary(at(kT), 60s), at(kT + 60)); // strictly after
  EXPECT_EQ(next_boundary(at(kT + 59, 999), 60s), at(kT + 60));
  EXPECT_EQ(next_boundary(at(kT + 1, 30), 2s), at(kT + 2));
  EXPECT_EQ(next_boundary(at(kT, 20), 50ms), at(kT, 50));
}

TEST(Schedule, OneIntervalDrainsEveryPeriodAndNeverEndsItEarly)
{
  Schedule schedule(options(2s), steady(0s), at(kT, 300));
  EXPECT_FALSE(schedule.drain_due(steady(1999ms)));
  EXPECT_TRUE(schedule.drain_due(steady(2s)));
  EXPECT_FALSE(schedule.ends_interval(at(kT + 1000)));
  // A drain that ran late moves the next one by the period from when it was due, not from now.
  schedule.drained(steady(2500ms), at(kT + 2, 800));
  EXPECT_FALSE(schedule.drain_due(steady(3999ms)));
  EXPECT_TRUE(schedule.drain_due(steady(4s)));
  // A drain later than a whole period is followed by the next one at once, not a burst.
  schedule.drained(steady(9s), at(kT + 9, 300));
  EXPECT_TRUE(schedule.drain_due(steady(9s)));
  schedule.drained(steady(9s), at(kT + 9, 300));
  EXPECT_FALSE(schedule.drain_due(steady(10999ms)));
  EXPECT_TRUE(schedule.drain_due(steady(11s)));
  EXPECT_EQ(schedule.next_wake(), steady(250ms)); // the perf maps, never read yet
}

TEST(Schedule, IntervalsEndAtWallClockMultiplesWithDrainsBetween)
{
  // Started 20.5 s into a minute: the first interval ends at the minute, drains every 2 s.
  Schedule::Options quiet = options(60s, 60s);
  quiet.perf_map_period = 1h; // out of the way of next_wake()
  Schedule schedule(quiet, steady(0s), at(kT + 20, 500));
  EXPECT_EQ(schedule.interval_end(), at(kT + 60));
  EXPECT_TRUE(schedule.drain_due(steady(2s)));
  EXPECT_FALSE(schedule.ends_interval(at(kT + 22, 500)));
  for (int drain = 1; drain <= 19; ++drain)
    schedule.drained(steady(drain * 2s), at(kT + 20 + drain * 2, 500));
  // The last periodic drain before the end would be at 60.5 s: the end comes first.
  EXPECT_EQ(schedule.next_wake(), steady(39500ms));
  EXPECT_TRUE(schedule.drain_due(steady(39500ms)));
  // The steady clock woke a hair before the wall clock's end: the interval ends all the same.
  EXPECT_TRUE(schedule.ends_interval(at(kT + 59, 997)));
  EXPECT_FALSE(schedule.ends_interval(at(kT + 59, 990)));
  schedule.interval_ended(at(kT + 59, 997));
  EXPECT_EQ(schedule.interval_end(), at(kT + 120));
  // The drain at the end counts as the one the period was waiting for.
  schedule.drained(steady(39500ms), at(kT + 60));
  EXPECT_EQ(schedule.next_wake(), steady(42s));
}

TEST(Schedule, AnExtraDrainComesSoonerAndLeavesThePeriodicOnesWhereTheyWere)
{
  Schedule::Options quiet = options(60s, 60s);
  quiet.perf_map_period = 1h;
  Schedule schedule(quiet, steady(0s), at(kT + 20));
  EXPECT_EQ(schedule.next_wake(), steady(2s));
  // A live profile wants a drain now, and one at 3.5 s.
  schedule.drain_by(steady(500ms));
  EXPECT_TRUE(schedule.drain_due(steady(500ms)));
  schedule.drained(steady(500ms), at(kT + 20, 500));
  EXPECT_EQ(schedule.next_wake(), steady(2s)); // the periodic drain stays
  schedule.drain_by(steady(3500ms));           // later than the periodic one: no change
  EXPECT_EQ(schedule.next_wake(), steady(2s));
  schedule.drained(steady(2s), at(kT + 22));
  schedule.drain_by(steady(3500ms));
  EXPECT_EQ(schedule.next_wake(), steady(3500ms));
  schedule.drained(steady(3500ms), at(kT + 23, 500));
  EXPECT_EQ(schedule.next_wake(), steady(4s));
  // The interval still ends at the minute.
  EXPECT_EQ(schedule.interval_end(), at(kT + 60));
}

TEST(Schedule, AfterAStallTheNextIntervalEndsAtTheNextMultiple)
{
  Schedule schedule(options(10s, 10s), steady(0s), at(kT + 1));
  EXPECT_EQ(schedule.interval_end(), at(kT + 10));
  // The machine slept for a minute and a half: one interval ends, and the next at the multiple
  // after now, none of those missed in between.
  EXPECT_TRUE(schedule.ends_interval(at(kT + 95)));
  schedule.interval_ended(at(kT + 95));
  EXPECT_EQ(schedule.interval_end(), at(kT + 100));
  // Ended exactly at the multiple: the next one, not the same.
  schedule.interval_ended(at(kT + 100));
  EXPECT_EQ(schedule.interval_end(), at(kT + 110));
}

TEST(Schedule, ShortIntervalsAreTheirOwnDrainPeriod)
{
  Schedule schedule(options(500ms, 500ms), steady(0s), at(kT, 100));
  EXPECT_EQ(schedule.next_wake(), steady(250ms)); // perf maps first
  EXPECT_TRUE(schedule.drain_due(steady(400ms))); // the end of the interval, at kT + 0.5 s
  EXPECT_FALSE(schedule.drain_due(steady(399ms)));
}

TEST(Schedule, LowFrequenciesDrainLessOftenWithinTheirIntervals)
{
  EXPECT_EQ(max_drain_period(99), 2s);
  EXPECT_EQ(max_drain_period(999), 2s);
  EXPECT_EQ(max_drain_period(49), 4040ms);
  EXPECT_EQ(max_drain_period(19), 10s);
  EXPECT_EQ(max_drain_period(1), 10s);
  // At 19 Hz, with 30 s intervals: every 10 s, the third drain at the interval's end.
  Schedule::Options low = options(30s, 30s);
  low.max_drain_period = max_drain_period(19);
  Schedule schedule(low, steady(0s), at(kT));
  EXPECT_FALSE(schedule.drain_due(steady(9999ms)));
  EXPECT_TRUE(schedule.drain_due(steady(10s)));
  schedule.drained(steady(10s), at(kT + 10));
  EXPECT_TRUE(schedule.drain_due(steady(20s)));
  schedule.drained(steady(20s), at(kT + 20));
  EXPECT_FALSE(schedule.ends_interval(at(kT + 20)));
  EXPECT_TRUE(schedule.drain_due(steady(30s)));
  EXPECT_TRUE(schedule.ends_interval(at(kT + 30)));
  // Drains never wait longer than the interval.
  Schedule::Options short_interval = options(5s, 5s);
  short_interval.max_drain_period = max_drain_period(19);
  Schedule five(short_interval, steady(0s), at(kT));
  EXPECT_TRUE(five.drain_due(steady(5s)));
}

TEST(Schedule, PerfMapsAreReadEveryPeriodFromTheLastRead)
{
  Schedule schedule(options(2s), steady(0s), at(kT));
  EXPECT_FALSE(schedule.perf_maps_due(steady(249ms)));
  EXPECT_TRUE(schedule.perf_maps_due(steady(250ms)));
  schedule.perf_maps_read(steady(300ms));
  EXPECT_FALSE(schedule.perf_maps_due(steady(549ms)));
  EXPECT_TRUE(schedule.perf_maps_due(steady(550ms)));
  EXPECT_EQ(schedule.next_wake(), steady(550ms));
}

TEST(Schedule, BoundedRecordingsFinishAtTheirDuration)
{
  Schedule unbounded(options(2s), steady(0s), at(kT));
  EXPECT_FALSE(unbounded.finished(steady(100000h)));
  Schedule::Options hundred_ms = options(2s);
  hundred_ms.duration = 100ms;
  Schedule bounded(hundred_ms, steady(0s), at(kT));
  EXPECT_FALSE(bounded.finished(steady(99ms)));
  EXPECT_TRUE(bounded.finished(steady(100ms)));
  EXPECT_EQ(bounded.next_wake(), steady(100ms));
}

} // namespace
} // namespace flamebpf::pipeline
