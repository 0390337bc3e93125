#include <chrono>
#include <gtest/gtest.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "common/stall_guard.h"

namespace flamebpf {
namespace {

using namespace std::chrono_literals;

// A pipe whose read end blocks a reader until something is written: a read that stalls in the
// kernel, as one of a file on a FUSE file system whose daemon does not answer.
struct Plug {
  Plug() { EXPECT_EQ(::pipe(fds), 0); }
  ~Plug()
  {
    ::close(fds[0]);
    ::close(fds[1]);
  }
  // Work that blocks until release(), then returns what it read.
  std::function<int()> blocked_read() const
  {
    int fd = fds[0];
    return [fd] {
      char byte = 0;
      return ::read(fd, &byte, 1) == 1 ? byte : -1;
    };
  }
  void release() const { EXPECT_EQ(::write(fds[1], "x", 1), 1); }
  int fds[2] = {-1, -1};
};

// Waits up to 5 s for the guard's stuck threads to come back to want.
bool stuck_comes_to(const StallGuard& guard, size_t want)
{
  for (int i = 0; i < 500 && guard.stalled_threads() != want; ++i)
    std::this_thread::sleep_for(10ms);
  return guard.stalled_threads() == want;
}

TEST(StallGuard, WorkInTimeGivesItsResult)
{
  StallGuard guard(2s);
  auto outcome = guard.run<int>([] { return 42; });
  ASSERT_TRUE(outcome.has_value());
  EXPECT_FALSE(outcome->stalled);
  EXPECT_EQ(outcome->result.get(), 42);
}

TEST(StallGuard, StalledWorkIsLeftAndItsResultComesLater)
{
  StallGuard guard(100ms);
  Plug plug;
  auto started = std::chrono::steady_clock::now();
  auto outcome = guard.run<int>(plug.blocked_read());
  auto waited = std::chrono::steady_clock::now() - started;
  ASSERT_TRUE(outcome.has_value());
  EXPECT_TRUE(outcome->stalled);
  EXPECT_GE(waited, 100ms);
  EXPECT_LT(waited, 2s);
  EXPECT_EQ(guard.stalled_threads(), 1u);
  // Other work goes on meanwhile, on a thread of its own.
  auto next = guard.run<int>([] { return 7; });
  ASSERT_TRUE(next.has_value());
  EXPECT_FALSE(next->stalled);
  EXPECT_EQ(next->result.get(), 7);
  // The stalled read ends when its "server" answers; its result is there to take.
  plug.release();
  EXPECT_EQ(outcome->result.get(), 'x');
  EXPECT_TRUE(stuck_comes_to(guard, 0));
}

TEST(StallGuard, TooManyStuckThreadsRefuseMoreWork)
{
  StallGuard guard(20ms);
  std::vector<std::unique_ptr<Plug>> plugs;
  for (size_t i = 0; i < StallGuard::kMaxStalled; ++i) {
    plugs.push_back(std::make_unique<Plug>());
    auto outcome = guard.run<int>(plugs.back()->blocked_read());
    ASSERT_TRUE(outcome.has_value());
    EXPECT_TRUE(outcome->stalled);
  }
  EXPECT_EQ(guard.stalled_threads(), StallGuard::kMaxStalled);
  EXPECT_FALSE(guard.run<int>([] { return 1; }).has_value());
  plugs.front()->release();
  ASSERT_TRUE(stuck_comes_to(guard, StallGuard::kMaxStalled - 1));
  auto accepted = guard.run<int>([] { return 1; });
  ASSERT_TRUE(accepted.has_value());
  EXPECT_EQ(accepted->result.get(), 1);
  for (auto& plug : plugs)
    plug->release();
  EXPECT_TRUE(stuck_comes_to(guard, 0));
}

TEST(StallGuard, WorkEndingJustAsItIsGivenUpOnLeavesNoThreadStuck)
{
  StallGuard guard(1ms);
  for (int i = 0; i < 200; ++i) {
    auto outcome = guard.run<int>([] {
      std::this_thread::sleep_for(1ms);
      return 1;
    });
    ASSERT_TRUE(outcome.has_value());
    EXPECT_EQ(outcome->result.get(), 1);
  }
  EXPECT_TRUE(stuck_comes_to(guard, 0));
}

TEST(StallGuard, WorkThatMakesProgressIsNoStallHoweverLong)
{
  // Parsing a big map in a sanitized build, say: busy on a CPU for three limits.
  StallGuard guard(50ms);
  auto outcome = guard.run<int>([] {
    auto end = std::chrono::steady_clock::now() + 150ms;
    volatile unsigned long spins = 0;
    while (std::chrono::steady_clock::now() < end)
      spins = spins + 1;
    return 3;
  });
  ASSERT_TRUE(outcome.has_value());
  EXPECT_FALSE(outcome->stalled);
  EXPECT_EQ(outcome->result.get(), 3);
  EXPECT_EQ(guard.stalled_threads(), 0u);
}

TEST(StallGuard, WorkThatReadsOnIsNoStallHoweverLong)
{
  // A slow disk: reads complete, a little at a time, with the thread waiting in between.
  StallGuard guard(50ms);
  Plug plug;
  std::thread disk([&plug] {
    for (int i = 0; i < 6; ++i) {
      std::this_thread::sleep_for(30ms);
      plug.release();
    }
  });
  int fd = plug.fds[0];
  auto outcome = guard.run<int>([fd] {
    char byte = 0;
    int got = 0;
    while (got < 6 && ::read(fd, &byte, 1) == 1)
      ++got;
    return got;
  });
  disk.join();
  ASSERT_TRUE(outcome.has_value());
  EXPECT_FALSE(outcome->stalled);
  EXPECT_EQ(outcome->result.get(), 6);
}

// While it waits for work, the thread's "meanwhile" task runs every step, never within itself.
TEST(StallGuard, WaitingRunsTheThreadsMeanwhileTaskEveryStep)
{
  int runs = 0;
  bool nested = false;
  bool inside = false;
  StallGuard guard(300ms);
  meanwhile::set_task([&] {
    nested |= inside;
    inside = true;
    ++runs;
    meanwhile::run_if_due(); // not run again from within itself
    inside = false;
  });
  auto outcome = guard.run<int>([] {
    std::this_thread::sleep_for(200ms);
    return 1;
  });
  ASSERT_TRUE(outcome.has_value());
  EXPECT_FALSE(outcome->stalled);
  EXPECT_EQ(outcome->result.get(), 1);
  // 200 ms: about 20 steps of 10 ms; a loaded machine runs fewer.
  EXPECT_GE(runs, 5);
  EXPECT_LE(runs, 21);
  EXPECT_FALSE(nested);

  // Without a task, or within kStep of its last run, nothing runs. The wait's last step may be
  // more than kStep ago on a loaded machine, so the first call may run it; the next, right after,
  // may not.
  meanwhile::run_if_due();
  int before = runs;
  meanwhile::run_if_due();
  EXPECT_EQ(runs, before);
  meanwhile::set_task({});
  std::this_thread::sleep_for(2 * meanwhile::kStep);
  meanwhile::run_if_due();
  EXPECT_EQ(runs, before);
}

} // namespace
} // namespace flamebpf
