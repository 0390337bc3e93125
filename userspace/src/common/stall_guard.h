// Work that reads a target's files runs on a thread of its own, and flamebpf waits for it only so
// long. A file on FUSE, or on an NFS server that went away, answers only when its server does; a
// container's FUSE daemon that never answers must not stop the sampling and the dumps of every
// other target, nor keep a -d run from ending on time.
//
// Work stalls when it makes no progress for the limit: its thread neither runs on a CPU nor
// completes a read (a big file read slowly, or parsed by a sanitized build, is no stall), or when
// it has gone on for kMaxWait in all. Stalled work goes on alone: the caller is told it stalled
// and moves on, and the work's result, should it ever come, waits in its Outcome for the caller
// to take. Later work goes to a fresh thread. At most kMaxStalled threads are left waiting on
// stalled work at once; beyond that, guarded work is refused until one of them returns.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <sys/types.h>
#include <thread>

#include "common/meanwhile.h"

namespace flamebpf {

class StallGuard {
public:
  static constexpr size_t kMaxStalled = 16;
  static constexpr std::chrono::seconds kMaxWait{30};

  explicit StallGuard(std::chrono::milliseconds limit);
  // Waits for the worker if it is idle or busy with work in time; a worker stuck on stalled work
  // is left to the operating system (a blocked read ends with the process).
  ~StallGuard();
  StallGuard(const StallGuard&) = delete;
  StallGuard& operator=(const StallGuard&) = delete;

  // What became of one piece of work.
  template <class T> struct Outcome {
    std::shared_future<T> result;
    bool stalled = false; // it overran the limit; result becomes ready when (if) it ends
  };

  // Runs work on the worker thread and waits up to the limit. nullopt if refused because
  // kMaxStalled threads are stuck already. work must own everything it touches (capture by value
  // or shared_ptr): after a stall it runs on while the caller goes on.
  template <class T> std::optional<Outcome<T>> run(std::function<T()> work)
  {
    auto task = std::make_shared<std::packaged_task<T()>>(std::move(work));
    std::shared_future<T> result = task->get_future().share();
    if (!post([task] { (*task)(); }))
      return std::nullopt;
    auto started = std::chrono::steady_clock::now();
    auto checked = started;
    // Taken at the first step, not at the start: most work is done before it, and reading the
    // worker's progress costs more than a perf map's poll.
    std::optional<Progress> before;
    // Waits in steps, so that the thread's other work goes on meanwhile (common/meanwhile.h).
    while (result.wait_for(std::min(limit_, meanwhile::kStep)) == std::future_status::timeout) {
      meanwhile::run_if_due();
      if (result.wait_for(std::chrono::seconds(0)) == std::future_status::ready)
        break; // done while the task ran: not to be judged idle
      auto now = std::chrono::steady_clock::now();
      if (!before) {
        before = progress();
        checked = now;
        continue;
      }
      if (now - checked < limit_)
        continue;
      Progress current = progress();
      if (current == before || now - started >= kMaxWait) {
        abandon_worker();
        return Outcome<T>{result, true};
      }
      before = current;
      checked = now;
    }
    return Outcome<T>{result, false};
  }

  // Threads currently stuck on stalled work.
  size_t stalled_threads() const { return stuck_->load(); }
  std::chrono::milliseconds limit() const { return limit_; }

private:
  // What the worker thread has done so far: its CPU time and the bytes its reads returned.
  struct Progress {
    int64_t cpu_ns = 0;
    uint64_t read_bytes = 0;
    friend bool operator==(const Progress&, const Progress&) = default;
  };
  // The current worker's progress.
  Progress progress() const;

  // One thread and its one-slot mailbox.
  struct Worker {
    std::mutex mutex;
    std::condition_variable wake;
    std::function<void()> job;
    bool quit = false;         // the guard is going away
    bool abandoned = false;    // the guard gave up waiting on its job
    std::atomic<pid_t> tid{0}; // the thread's id, for its /proc/self/task/<tid>/io
    std::thread thread;
  };
  // Hands job to the worker (starting one if needed); false if too many threads are stuck.
  bool post(std::function<void()> job);
  // Leaves the current worker to finish its stalled job alone; it exits when done.
  void abandon_worker();
  static void work(std::shared_ptr<Worker> worker, std::shared_ptr<std::atomic<size_t>> stuck);

  std::chrono::milliseconds limit_;
  std::shared_ptr<Worker> worker_;
  std::shared_ptr<std::atomic<size_t>> stuck_ = std::make_shared<std::atomic<size_t>>(0);
};

// Reads of one target's file made as frames need them, one at a time: after one stalls, none is
// tried until it ends, so that a stalled file holds one of the guard's threads, not one per frame.
template <class T> class GuardedReads {
public:
  // What read gives, read in guard if given (else directly); nullopt if the guard refused it, if
  // it stalled (said by stalled(limit), once for it) or if a read that stalled has not ended.
  template <class OnStall>
  std::optional<T> run(StallGuard* guard, std::function<std::optional<T>()> read, OnStall&& stalled)
  {
    if (stalled_.valid()) {
      if (stalled_.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
        return std::nullopt;
      stalled_ = {};
    }
    if (!guard)
      return read();
    auto outcome = guard->run<std::optional<T>>(std::move(read));
    if (!outcome)
      return std::nullopt;
    if (outcome->stalled) {
      stalled(guard->limit());
      stalled_ = outcome->result;
      return std::nullopt;
    }
    return outcome->result.get();
  }

private:
  std::shared_future<std::optional<T>> stalled_;
};

} // namespace flamebpf
