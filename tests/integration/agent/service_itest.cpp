// flamebpf as a systemd service of Type=notify, through systemd's own client library on
// flamebpf's side and a notify socket of the test's on the other: what systemd would receive.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <gtest/gtest.h>
#include <string>
#include <sys/socket.h>
#include <sys/un.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "harness.h"
#include "notify_socket.h"

namespace flamebpf::testing {
namespace {

using Clock = std::chrono::steady_clock;

size_t count(const std::vector<std::string>& messages, const std::string& message)
{
  return static_cast<size_t>(std::count(messages.begin(), messages.end(), message));
}

TEST(Service, TellsSystemdWhenReadyPingsTheWatchdogAndSaysWhenStopping)
{
  ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
  TempDir dir;
  NotifySocket systemd(dir.path().string() + "/notify");
  // What systemd puts in a Type=notify service's environment, with WatchdogSec=1s.
  ::setenv("NOTIFY_SOCKET", (dir.path().string() + "/notify").c_str(), 1);
  ::setenv("WATCHDOG_USEC", "1000000", 1);
  std::string log = dir.path().string() + "/log";
  Child agent({FLAMEBPF_BINARY, "--all-containers", "--containers-only", "--output-dir",
               dir.path().string() + "/out", "--interval", "1"},
              "", log);
  ::unsetenv("NOTIFY_SOCKET");
  ::unsetenv("WATCHDOG_USEC");

  // Read as systemd does, at once: a full socket would hold flamebpf up.
  std::vector<std::string> messages;
  auto receive_for = [&](std::chrono::milliseconds how_long, const std::string& until) {
    poll_until(
        [&] {
          auto more = systemd.take();
          messages.insert(messages.end(), more.begin(), more.end());
          return !until.empty() && count(messages, until) > 0;
        },
        how_long, std::chrono::milliseconds(10));
  };
  receive_for(std::chrono::seconds(20), "READY=1");
  ASSERT_EQ(count(messages, "READY=1"), 1u) << read_text(log);
  // Three seconds of watchdog pings, at a quarter of the period or so.
  receive_for(std::chrono::seconds(3), "");
  agent.signal(SIGHUP);
  receive_for(std::chrono::milliseconds(500), "");
  agent.signal(SIGTERM);
  receive_for(std::chrono::seconds(20), "STOPPING=1");
  EXPECT_EQ(agent.wait(), 0) << read_text(log);
  receive_for(std::chrono::milliseconds(0), "");
  size_t pings = count(messages, "WATCHDOG=1");
  std::printf("[ FIGURES  ] %zu watchdog pings in about 3.5 s at WatchdogSec=1s\n", pings);
  EXPECT_GE(pings, 8u);
  EXPECT_LE(pings, 20u);
  EXPECT_EQ(count(messages, "RELOADING=1"), 1u);
  EXPECT_EQ(count(messages, "READY=1"), 2u);
  ASSERT_FALSE(messages.empty());
  EXPECT_EQ(messages.back(), "STOPPING=1");
}

} // namespace
} // namespace flamebpf::testing
