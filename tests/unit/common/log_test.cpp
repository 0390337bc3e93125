#include <cstdio>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>

#include "common/log.h"

namespace flamebpf::log {
namespace {

TEST(Printable, KeepsTextAndUtf8)
{
  EXPECT_EQ(printable("target web: process 42 exited"), "target web: process 42 exited");
  EXPECT_EQ(printable("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x94\xA5"),
            "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x94\xA5");
}

TEST(Printable, EscapesWhatActsOnATerminal)
{
  // ESC ] 0 ; title BEL retitles a terminal; CR and LF forge lines; ESC [ 2 J clears the screen.
  EXPECT_EQ(printable("a\x1b]0;pwned\x07z"), "a\\x1b]0;pwned\\x07z");
  EXPECT_EQ(printable("a\r\nflamebpf: error: forged"), "a\\x0d\\x0aflamebpf: error: forged");
  EXPECT_EQ(printable("\x1b[2J"), "\\x1b[2J");
  EXPECT_EQ(printable(std::string("nul\0byte", 8)), "nul\\x00byte");
  EXPECT_EQ(printable("del\x7f"), "del\\x7f");
  // C1 CSI (U+009B) and a right-to-left override (U+202E) encoded as UTF-8.
  EXPECT_EQ(printable("\xC2\x9B"
                      "31m"),
            "\\xc2\\x9b31m");
  EXPECT_EQ(printable("gpj.\xE2\x80\xAE"
                      "exe"),
            "gpj.\\xe2\\x80\\xaeexe");
  // A backslash is doubled: "\x41" written by a target cannot pass for an escaped byte.
  EXPECT_EQ(printable("\\x41"), "\\\\x41");
}

TEST(Printable, EscapesBytesThatAreNotUtf8)
{
  EXPECT_EQ(printable("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(printable("\xC3"), "\\xc3");                            // cut short
  EXPECT_EQ(printable("\xC0\xAF"), "\\xc0\\xaf");                   // overlong '/'
  EXPECT_EQ(printable("\xED\xA0\x80"), "\\xed\\xa0\\x80");          // a UTF-16 surrogate
  EXPECT_EQ(printable("\xF4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80"); // beyond U+10FFFF
  EXPECT_EQ(printable("ok\xE2\x82"
                      "ok"),
            "ok\\xe2\\x82ok");
}

TEST(WarningBudget, ShowsSoManyPerWindowThenCountsTheRest)
{
  WarningBudget budget;
  WarningBudget::Clock::time_point start{};
  int shown = 0;
  for (int i = 0; i < 200; ++i) {
    EXPECT_EQ(budget.roll(start + std::chrono::seconds(1)), 0u);
    shown += budget.admit(start + std::chrono::seconds(1));
  }
  EXPECT_EQ(shown, static_cast<int>(WarningBudget::kWarningsPerWindow));
  EXPECT_EQ(budget.suppressed(), 200u - WarningBudget::kWarningsPerWindow);
  // Still the same window just before its end; a new one after.
  EXPECT_EQ(budget.roll(start + WarningBudget::kWindow), 0u);
  EXPECT_EQ(budget.roll(start + WarningBudget::kWindow + std::chrono::seconds(1)),
            200u - WarningBudget::kWarningsPerWindow);
  EXPECT_EQ(budget.suppressed(), 0u);
  EXPECT_TRUE(budget.admit(start + WarningBudget::kWindow + std::chrono::seconds(1)));
}

// The real logger, writing into a pipe in place of stderr.
class LoggerOutput : public ::testing::Test {
protected:
  void SetUp() override
  {
    ASSERT_EQ(::pipe2(pipe_, O_NONBLOCK | O_CLOEXEC), 0);
    ::fcntl(pipe_[1], F_SETPIPE_SZ, 1 << 20);
    saved_ = ::dup(STDERR_FILENO);
    ::dup2(pipe_[1], STDERR_FILENO);
  }
  void TearDown() override
  {
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
    ::close(pipe_[0]);
    ::close(pipe_[1]);
  }
  std::string written()
  {
    std::string text;
    char buffer[65536];
    for (ssize_t n; (n = ::read(pipe_[0], buffer, sizeof buffer)) > 0;)
      text.append(buffer, static_cast<size_t>(n));
    return text;
  }
  int pipe_[2] = {-1, -1};
  int saved_ = -1;
};

TEST_F(LoggerOutput, OneSafeLinePerMessageAndWarningsRateLimited)
{
  init(false);
  spdlog::info("target {}: process 7 exited", "evil\x1b]0;x\x07\nflamebpf: error: forged");
  for (int i = 0; i < 120; ++i)
    spdlog::warn("warning {}", i);
  spdlog::error("an error is never held back");
  flush_suppressed();
  std::string text = written();
  std::istringstream lines(text);
  std::vector<std::string> all;
  for (std::string line; std::getline(lines, line);)
    all.push_back(line);
  ASSERT_EQ(all.size(), 1 + WarningBudget::kWarningsPerWindow + 2) << text;
  EXPECT_EQ(all[0],
            "flamebpf: info: target evil\\x1b]0;x\\x07\\x0aflamebpf: error: forged: process "
            "7 exited");
  EXPECT_EQ(all[WarningBudget::kWarningsPerWindow], "flamebpf: warning: warning 49");
  EXPECT_EQ(all[WarningBudget::kWarningsPerWindow + 1],
            "flamebpf: error: an error is never held back");
  EXPECT_EQ(all.back(), "flamebpf: warning: 70 more warnings were not shown (at most 50 are "
                        "shown a minute; run with -v to see all)");
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
  init(false);
}

TEST_F(LoggerOutput, VerboseShowsEveryWarning)
{
  init(true);
  for (int i = 0; i < 120; ++i)
    spdlog::warn("warning {}", i);
  flush_suppressed();
  std::string text = written();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 120) << text;
  init(false);
}

TEST_F(LoggerOutput, LinesOfTwoThreadsNeverInterleave)
{
  // The attacher's thread logs while the main thread does.
  init(false);
  auto log_lines = [](char tag) {
    for (int i = 0; i < 1500; ++i)
      spdlog::info("{} {} {}", std::string(100, tag), i, std::string(100, tag));
  };
  std::thread other(log_lines, 'b');
  log_lines('a');
  other.join();
  std::istringstream lines(written());
  int count = 0;
  for (std::string line; std::getline(lines, line); ++count) {
    char tag = line.size() > 16 ? line[16] : '?';
    std::string part(100, tag);
    EXPECT_TRUE(line.starts_with("flamebpf: info: " + part + " ") && line.ends_with(" " + part))
        << line;
  }
  EXPECT_EQ(count, 3000);
}

} // namespace
} // namespace flamebpf::log
