#include "serve/heavy_answers.h"

#include <memory>

#include "common/capabilities.h"

namespace flamebpf::serve {
HeavyAnswers::HeavyAnswers()
    : thread_(caps::start_thread(caps::Role::kNone, kServingThreadName, [this] { run(); }))
{
}

HeavyAnswers::~HeavyAnswers()
{
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    queue_.clear(); // their connections are answered 503 as the server stops
  }
  ready_.notify_all();
  thread_.join();
}

HttpResponse HeavyAnswers::deferred(std::function<HttpResponse()> make)
{
  HttpResponse response;
  response.deferred = [this, make = std::move(make)](Reply reply) {
    {
      std::lock_guard lock(mutex_);
      if (queue_.size() < kMaxQueued && !stopping_) {
        queue_.push_back([reply, make] {
          if (reply.abandoned())
            return;
          auto answer = std::make_shared<HttpResponse>(make());
          reply([answer] { return std::move(*answer); });
        });
        ready_.notify_one();
        return;
      }
    }
    reply([] {
      HttpResponse busy =
          plain_text(503, "other long answers are being made; try again in a few seconds");
      busy.headers["Retry-After"] = "5";
      return busy;
    });
  };
  return response;
}

void HeavyAnswers::run()
{
  become_a_serving_thread();
  std::unique_lock lock(mutex_);
  for (;;) {
    ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_)
      return;
    auto job = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    job();
    lock.lock();
  }
}

} // namespace flamebpf::serve
