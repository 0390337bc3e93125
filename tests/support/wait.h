// Waiting on a condition instead of sleeping for a guessed time.
#pragma once

#include <chrono>
#include <gtest/gtest.h>
#include <string_view>
#include <thread>

namespace flamebpf::testing {

// Checks condition every step until it holds (true) or timeout has passed (false). For harness
// code that reports a timeout its own way; tests use wait_until().
template <class Condition>
bool poll_until(Condition&& condition,
                std::chrono::steady_clock::duration timeout,
                std::chrono::steady_clock::duration step = std::chrono::milliseconds(20))
{
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (condition())
      return true;
    if (std::chrono::steady_clock::now() >= deadline)
      return false;
    std::this_thread::sleep_for(step);
  }
}

// As poll_until(), and a timeout fails the calling test, saying what was awaited (e.g. "burner
// to run in its cgroup") and for how long. Returns whether the condition held, for ASSERT_TRUE.
template <class Condition>
bool wait_until(Condition&& condition,
                std::chrono::steady_clock::duration timeout,
                std::string_view what,
                std::chrono::steady_clock::duration step = std::chrono::milliseconds(20))
{
  if (poll_until(condition, timeout, step))
    return true;
  ADD_FAILURE() << "timed out after "
                << std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count()
                << " ms waiting for " << what;
  return false;
}

} // namespace flamebpf::testing
