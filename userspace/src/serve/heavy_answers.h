// The answers that read and render many dumps (a range's profile, a diff): made one at a time on
// a thread of their own, so that the server's threads answer /metrics, /targets and scrapes
// meanwhile, and two such requests never hold twice the memory.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "serve/http_server.h"

namespace flamebpf::serve {

class HeavyAnswers {
public:
  // Requests waiting for their turn; beyond, 503 with Retry-After.
  static constexpr size_t kMaxQueued = 4;

  HeavyAnswers();
  ~HeavyAnswers();
  HeavyAnswers(const HeavyAnswers&) = delete;
  HeavyAnswers& operator=(const HeavyAnswers&) = delete;

  // A deferred answer that make gives on this thread when its turn comes; not made at all if the
  // client went away meanwhile.
  HttpResponse deferred(std::function<HttpResponse()> make);

private:
  void run();

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

} // namespace flamebpf::serve
