#include "common/meanwhile.h"

namespace flamebpf::meanwhile {
namespace {

thread_local std::function<void()> g_task;
thread_local bool g_running = false;
thread_local std::chrono::steady_clock::time_point g_last_run;

} // namespace

void set_task(std::function<void()> task)
{
  g_task = std::move(task);
  g_last_run = std::chrono::steady_clock::now();
}

void run_if_due()
{
  if (!g_task || g_running)
    return;
  auto now = std::chrono::steady_clock::now();
  if (now - g_last_run < kStep)
    return;
  g_running = true;
  g_task();
  g_running = false;
  g_last_run = std::chrono::steady_clock::now();
}

} // namespace flamebpf::meanwhile
