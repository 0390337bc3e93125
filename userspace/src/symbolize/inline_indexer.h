// Builds the inline indexes of ELF files (symbolize/dwarf_inlines.h) on one thread of its own, at
// the lowest priority: reading a debug file's DWARF takes tens of milliseconds for glibc's and
// seconds for the largest, which no report cycle may wait for. A file's inlined frames are named
// from the interval after its index is built, as a debug file fetched by debuginfod is.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"

namespace flamebpf::symbolize {

class InlineIndex;

// Where a file's DWARF is: the file itself or its debug file, opened (and checked to be the
// file's) when its symbols were read. The descriptor is held until the index is built, so a file
// swapped in meanwhile is never read.
struct InlineSource {
  UniqueFd fd;
  uint64_t bias = 0; // added to DWARF addresses to make them the file's
  std::string shown; // names the DWARF's file in messages
};

class InlineIndexer {
public:
  InlineIndexer();
  // Waits a little for a build under way; one stuck on a stalled read is left to finish alone.
  ~InlineIndexer();
  InlineIndexer(const InlineIndexer&) = delete;
  InlineIndexer& operator=(const InlineIndexer&) = delete;

  // Files waiting for their build, at most: each holds a descriptor. A file not queued for room
  // is queued again when its symbols are next read.
  static constexpr size_t kMaxQueued = 64;

  // Queues the build of source's index for the file known by key; false if the queue is full.
  bool queue(uint64_t key, InlineSource source);

  struct Built {
    uint64_t key = 0;
    Result<std::shared_ptr<const InlineIndex>> index = nullptr;
    std::vector<std::string> problems; // what budgets cut and malformed parts skipped
    std::string shown;
    std::chrono::milliseconds took{0};
  };
  // The builds finished since the last call.
  std::vector<Built> take_built();
  // Builds queued or under way whose result has not come.
  size_t pending() const;

  // The recording ends and its last names wait for the builds: they go on at the caller's
  // priority, on a thread of their own, the queued ones and the one under way alike (built a
  // second time: the thread at the lowest priority may get no CPU at all on a busy host). Whichever
  // build of a file ends first gives its result.
  void hurry();

private:
  struct Job {
    uint64_t key;
    std::shared_ptr<const InlineSource> source; // shared by the builds of a hurried file
  };
  // Shared with the thread, which may outlive this if a read stalls.
  struct State {
    mutable std::mutex mutex;
    std::condition_variable wake;
    std::condition_variable idle;
    std::deque<Job> queued;
    std::vector<Built> built;
    std::set<uint64_t> outstanding; // keys queued or under way, until one of their builds ends
    std::optional<Job> under_way;   // the worker's
    bool under_way_hurried = false;
    bool stop = false;
    bool exited = false;
    // Set with stop: the builds under way end before their next unit, so that no thread of the
    // lowest priority is left building at the exit (the last thread to end tears the process
    // down, which took it 30 s and more on a host whose CPUs were busy).
    std::atomic<bool> cancelled = false;
  };
  static void run(const std::shared_ptr<State>& state);
  // Gives a build's result, unless another build of its file gave one first.
  static void deliver(State& state, Built built);

  std::shared_ptr<State> state_;
};

} // namespace flamebpf::symbolize
