// What flamebpf logs about its targets cannot act on the terminal or journal that shows it.
#include <chrono>
#include <csignal>
#include <gtest/gtest.h>
#include <string>
#include <thread>
#include <unistd.h>

#include "harness.h"

namespace flamebpf::testing {
namespace {

TEST(LogSafety, ANameATargetChoseCannotActOnTheTerminal)
{
  ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
  TempDir dir;
  // ESC ] 2 ; ... BEL retitles a terminal window; the newline would forge a log line of its own.
  std::string name = "ev\x1b]2;x\x07\nil";
  auto burner = copy_burner(dir.path(), name);
  Child victim({burner, "15"});
  std::string pid = std::to_string(victim.pid());
  wait_until_busy(victim.pid(), name);
  std::string log = dir.path().string() + "/log";
  Child profiler(
      {FLAMEBPF_BINARY, "--pid", pid, "-d", "4", "-o", dir.path().string() + "/out.folded"}, "",
      log);
  wait_until_sampling(profiler.pid());
  // Its exit is logged with the target's name, which is the process's name.
  victim.signal(SIGKILL);
  victim.wait();
  ASSERT_EQ(profiler.wait(), 0) << read_text(log);
  std::string text = read_text(log);
  EXPECT_NE(text.find("ev\\x1b]2;x\\x07\\x0ail-" + pid), std::string::npos) << text;
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_EQ(text.find('\x07'), std::string::npos) << text;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    std::string line = text.substr(start, end - start);
    EXPECT_TRUE(line.starts_with("flamebpf: ")) << "a line not of flamebpf's own: " << line;
    start = end == std::string::npos ? text.size() : end + 1;
  }
}

} // namespace
} // namespace flamebpf::testing
