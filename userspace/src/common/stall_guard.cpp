#include "common/stall_guard.h"

#include <cstdio>
#include <ctime>
#include <pthread.h>
#include <unistd.h>

namespace flamebpf {

StallGuard::StallGuard(std::chrono::milliseconds limit) : limit_(limit) {}

StallGuard::~StallGuard()
{
  if (!worker_)
    return;
  {
    std::lock_guard lock(worker_->mutex);
    worker_->quit = true;
  }
  worker_->wake.notify_one();
  worker_->thread.join();
}

StallGuard::Progress StallGuard::progress() const
{
  Progress done;
  clockid_t clock{};
  timespec cpu{};
  if (::pthread_getcpuclockid(worker_->thread.native_handle(), &clock) == 0 &&
      ::clock_gettime(clock, &cpu) == 0)
    done.cpu_ns = int64_t{cpu.tv_sec} * 1'000'000'000 + cpu.tv_nsec;
  // rchar: bytes read() and its kin returned, a read from a slow disk included.
  pid_t tid = worker_->tid.load();
  if (tid == 0)
    return done;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/io", static_cast<int>(tid));
  if (FILE* io = std::fopen(path, "re")) {
    unsigned long long bytes = 0;
    if (std::fscanf(io, "rchar: %llu", &bytes) == 1)
      done.read_bytes = bytes;
    std::fclose(io);
  }
  return done;
}

void StallGuard::work(std::shared_ptr<Worker> worker, std::shared_ptr<std::atomic<size_t>> stuck)
{
  worker->tid.store(static_cast<pid_t>(::gettid()));
  std::unique_lock lock(worker->mutex);
  for (;;) {
    worker->wake.wait(lock, [&] { return worker->job || worker->quit || worker->abandoned; });
    if (!worker->job) {
      // Given up on just as its job ended: it counted as stuck, and is not any more.
      if (worker->abandoned)
        stuck->fetch_sub(1);
      return;
    }
    std::function<void()> job = std::move(worker->job);
    worker->job = nullptr;
    lock.unlock();
    job();
    lock.lock();
    if (worker->abandoned) {
      stuck->fetch_sub(1);
      return;
    }
  }
}

bool StallGuard::post(std::function<void()> job)
{
  if (!worker_) {
    if (stuck_->load() >= kMaxStalled)
      return false;
    worker_ = std::make_shared<Worker>();
    worker_->thread = std::thread(work, worker_, stuck_);
  }
  {
    std::lock_guard lock(worker_->mutex);
    worker_->job = std::move(job);
  }
  worker_->wake.notify_one();
  return true;
}

void StallGuard::abandon_worker()
{
  stuck_->fetch_add(1);
  {
    std::lock_guard lock(worker_->mutex);
    worker_->abandoned = true;
  }
  worker_->wake.notify_one();
  worker_->thread.detach();
  worker_.reset();
}

} // namespace flamebpf
