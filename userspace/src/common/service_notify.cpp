#include "common/service_notify.h"

#include <cstdint>
#include <systemd/sd-daemon.h>

namespace flamebpf {

ServiceNotifier::ServiceNotifier()
{
  uint64_t period_us = 0;
  if (sd_watchdog_enabled(0, &period_us) > 0 && period_us > 0)
    ping_every_ = std::chrono::microseconds(period_us / 4);
}

void ServiceNotifier::ready()
{
  sd_notify(0, "READY=1");
}

void ServiceNotifier::alive()
{
  if (ping_every_ == std::chrono::steady_clock::duration::zero())
    return;
  auto now = std::chrono::steady_clock::now();
  if (now - last_ping_ < ping_every_)
    return;
  last_ping_ = now;
  sd_notify(0, "WATCHDOG=1");
}

void ServiceNotifier::reloading()
{
  sd_notify(0, "RELOADING=1");
}

void ServiceNotifier::stopping()
{
  sd_notify(0, "STOPPING=1");
}

} // namespace flamebpf
