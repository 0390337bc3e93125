// What flamebpf asks of the system for itself.
#include <chrono>
#include <gtest/gtest.h>
#include <sstream>
#include <string>
#include <thread>

#include "harness.h"

namespace flamebpf::testing {
namespace {

// The soft and hard "Max open files" of /proc/<pid>/limits, or "" if unreadable.
std::string open_files_limits(pid_t pid)
{
  std::string limits = read_text("/proc/" + std::to_string(pid) + "/limits");
  auto at = limits.find("Max open files");
  if (at == std::string::npos)
    return "";
  std::string line = limits.substr(at, limits.find('\n', at) - at);
  std::istringstream fields(line.substr(std::string("Max open files").size()));
  std::string soft;
  std::string hard;
  fields >> soft >> hard;
  return soft + " " + hard;
}

TEST(Resources, OpenFilesLimitIsRaisedToTheHardLimit)
{
  ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
  TempDir dir;
  // A soft limit of 256 under a hard one of 4096, as a shell may hand down.
  Child profiler({"/usr/bin/prlimit", "--nofile=256:4096", FLAMEBPF_BINARY, "-d", "3", "-o",
                  dir.path().string() + "/out.folded"},
                 "", dir.path().string() + "/log");
  std::string seen;
  poll_until(
      [&] {
        seen = open_files_limits(profiler.pid());
        return seen == "4096 4096";
      },
      std::chrono::seconds(2));
  EXPECT_EQ(seen, "4096 4096") << read_text(dir.path().string() + "/log");
  EXPECT_EQ(profiler.wait(), 0) << read_text(dir.path().string() + "/log");
}

} // namespace
} // namespace flamebpf::testing
