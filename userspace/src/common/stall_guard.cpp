#include "common/stall_guard.h"

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

void StallGuard::work(std::shared_ptr<Worker> worker, std::shared_ptr<std::atomic<size_t>> stuck)
{
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
