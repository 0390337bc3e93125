#include "symbolize/inline_indexer.h"

#include <malloc.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include "common/elf_reader.h"
#include "symbolize/dwarf_inlines.h"

namespace flamebpf::symbolize {
namespace {

// How long the destructor waits for a build under way (glibc's takes tens of milliseconds; a
// larger one is abandoned, its result dropped).
constexpr std::chrono::seconds kStopWait{2};

InlineIndexer::Built
build(uint64_t key, const InlineSource& source, const std::atomic<bool>& cancelled)
{
  InlineIndexer::Built built;
  built.key = key;
  built.shown = source.shown;
  auto started = std::chrono::steady_clock::now();
  struct stat status {};
  if (::fstat(source.fd.get(), &status) != 0) {
    built.index = fail(system_error(errno, "cannot stat " + source.shown));
  } else if (auto reader = ElfReader::open(
                 ElfBytes::file(source.fd.get(), static_cast<uint64_t>(status.st_size)),
                 source.shown);
             !reader) {
    built.index = fail(reader.error());
  } else if (auto index = InlineIndex::build(*reader, source.bias, built.problems,
                                             kMaxInlineBuildBytes, &cancelled);
             !index) {
    built.index = fail(index.error());
  } else {
    built.index = std::shared_ptr<const InlineIndex>(std::move(*index));
  }
  built.took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
  return built;
}

} // namespace

InlineIndexer::InlineIndexer() : state_(std::make_shared<State>())
{
  // Detached: a read of a stalled file system may never return, and must not hold up the exit.
  std::thread([state = state_] { run(state); }).detach();
}

InlineIndexer::~InlineIndexer()
{
  std::unique_lock lock(state_->mutex);
  state_->stop = true;
  state_->cancelled = true;
  state_->queued.clear();
  state_->wake.notify_all();
  state_->idle.wait_for(lock, kStopWait, [&] { return state_->exited; });
}

bool InlineIndexer::queue(uint64_t key, InlineSource source)
{
  std::lock_guard lock(state_->mutex);
  if (state_->queued.size() >= kMaxQueued)
    return false;
  state_->queued.push_back({key, std::make_shared<const InlineSource>(std::move(source))});
  state_->outstanding.insert(key);
  state_->wake.notify_one();
  return true;
}

void InlineIndexer::hurry()
{
  std::vector<Job> jobs;
  {
    std::lock_guard lock(state_->mutex);
    if (state_->under_way && !state_->under_way_hurried) {
      state_->under_way_hurried = true;
      jobs.push_back(*state_->under_way);
    }
    for (auto& job : state_->queued)
      jobs.push_back(std::move(job));
    state_->queued.clear();
  }
  if (jobs.empty())
    return;
  // Detached, as the worker: a read of a stalled file system must not hold up the exit.
  std::thread([state = state_, jobs = std::move(jobs)] {
    for (const Job& job : jobs) {
      {
        std::lock_guard lock(state->mutex);
        if (state->stop)
          return;
      }
      Built built = build(job.key, *job.source, state->cancelled);
      std::lock_guard lock(state->mutex);
      deliver(*state, std::move(built));
    }
  }).detach();
}

void InlineIndexer::deliver(State& state, Built built)
{
  if (!state.stop && state.outstanding.erase(built.key) > 0)
    state.built.push_back(std::move(built));
  state.idle.notify_all();
}

std::vector<InlineIndexer::Built> InlineIndexer::take_built()
{
  std::lock_guard lock(state_->mutex);
  return std::exchange(state_->built, {});
}

size_t InlineIndexer::pending() const
{
  std::lock_guard lock(state_->mutex);
  return state_->outstanding.size();
}

void InlineIndexer::run(const std::shared_ptr<State>& state)
{
  // The lowest priority: the builds use CPU the host has to spare, after the targets and after
  // flamebpf's own sampling and reports.
  ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 19);
  std::unique_lock lock(state->mutex);
  for (;;) {
    state->wake.wait(lock, [&] { return state->stop || !state->queued.empty(); });
    if (state->stop)
      break;
    Job job = std::move(state->queued.front());
    state->queued.pop_front();
    state->under_way = job;
    state->under_way_hurried = false;
    lock.unlock();
    Built built = build(job.key, *job.source, state->cancelled);
    job.source.reset(); // the descriptor closes with the last build of the file
    lock.lock();
    state->under_way.reset();
    deliver(*state, std::move(built));
    lock.unlock();
    // What the build held is freed, but glibc keeps it in this thread's arena; a build is rare,
    // and the daemon should not keep its peak for good.
    ::malloc_trim(0);
    lock.lock();
  }
  state->exited = true;
  state->idle.notify_all();
}

} // namespace flamebpf::symbolize
