// Talking to systemd when flamebpf runs as its service (Type=notify): READY=1 once sampling runs,
// WATCHDOG=1 from the main loop while it turns, STOPPING=1 at the end. Outside systemd
// (no $NOTIFY_SOCKET) every call does nothing.
//
// With WatchdogSec= in the unit, systemd restarts flamebpf when the main loop stops turning. The
// loop never waits on a target's files (see StallGuard), so a stop is flamebpf's own fault, and
// a restart is the cure.
#pragma once

#include <chrono>

namespace flamebpf {

class ServiceNotifier {
public:
  // Reads the watchdog period systemd asks for ($WATCHDOG_USEC), if any.
  ServiceNotifier();

  // Sampling runs: systemd considers the service started.
  void ready();
  // The main loop turned; pings the watchdog at most every quarter of its period.
  void alive();
  // SIGHUP is being handled (ExecReload=), then ready() again.
  void reloading();
  // flamebpf is writing its last interval and exiting.
  void stopping();

private:
  std::chrono::steady_clock::duration ping_every_{};
  std::chrono::steady_clock::time_point last_ping_{};
};

} // namespace flamebpf
