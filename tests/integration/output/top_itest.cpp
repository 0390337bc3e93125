// `flamebpf top` in a real terminal: tmux runs it over a workload with a known 3:1 split, the
// test reads the screen with capture-pane and types with send-keys; --batch through a pipe; and a
// hostile process's names (5,000 characters, escape sequences, bytes that are not UTF-8) on a
// terminal resized to 40x10, with every byte flamebpf wrote to the terminal kept by pipe-pane.
#include <chrono>
#include <filesystem>
#include <gtest/gtest.h>
#include <regex>
#include <signal.h>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "harness.h"
#include "process.h"
#include "temp_dir.h"
#include "wait.h"

namespace flamebpf::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// A tmux server of the test's own (its socket in the test's directory) with one window of the
// given size running command, from directory.
class Tmux {
public:
  Tmux(const std::string& directory, int columns, int rows, const std::string& command)
      : socket_(directory + "/tmux.socket")
  {
    auto started = run({"new-session", "-d", "-s", "top", "-x", std::to_string(columns), "-y",
                        std::to_string(rows), "-c", directory, command});
    EXPECT_EQ(started.status, 0) << started.err;
  }
  ~Tmux() { run({"kill-server"}); }

  ProcessOutput run(std::vector<std::string> arguments) const
  {
    std::vector<std::string> argv{"/usr/bin/tmux", "-S", socket_, "-f", "/dev/null"};
    argv.insert(argv.end(), arguments.begin(), arguments.end());
    return run_process(argv, {}, 30s);
  }
  // The screen as text, one string per row.
  std::vector<std::string> screen() const
  {
    auto captured = run({"capture-pane", "-p", "-t", "top"});
    std::vector<std::string> rows;
    std::istringstream lines(captured.out);
    for (std::string line; std::getline(lines, line);)
      rows.push_back(line);
    return rows;
  }
  std::string screen_text() const
  {
    std::string text;
    for (const auto& row : screen())
      text += row + "\n";
    return text;
  }
  void keys(const std::vector<std::string>& keys) const
  {
    std::vector<std::string> arguments{"send-keys", "-t", "top"};
    arguments.insert(arguments.end(), keys.begin(), keys.end());
    auto sent = run(arguments);
    EXPECT_EQ(sent.status, 0) << sent.err;
  }
  bool alive() const { return run({"has-session", "-t", "top"}).status == 0; }
  // Waits until the screen holds text (a regular expression).
  bool wait_for_screen(const std::string& pattern, std::chrono::seconds timeout) const
  {
    std::regex wanted(pattern);
    return wait_until([&] { return std::regex_search(screen_text(), wanted); }, timeout,
                      "the screen to show /" + pattern + "/");
  }

private:
  std::string socket_;
};

// The row of the function list that names function, as "SELF% TOTAL% SAMPLES KIND FUNCTION".
struct ListRow {
  size_t line = 0;
  double self = 0;
  double total = 0;
};
std::optional<ListRow> list_row(const std::vector<std::string>& screen, const std::string& function)
{
  std::regex row(R"(^\s*([0-9.]+)\s+([0-9.]+)\s+([0-9]+)\s+(\S+)\s+(\S+))");
  for (size_t i = 0; i < screen.size(); ++i) {
    std::smatch match;
    if (std::regex_search(screen[i], match, row) && match[5] == function)
      return ListRow{i, std::stod(match[1]), std::stod(match[2])};
  }
  return std::nullopt;
}

std::string flamebpf_top(const std::vector<std::string>& arguments, const std::string& log)
{
  std::string command = std::string("exec ") + FLAMEBPF_BINARY + " top";
  for (const auto& argument : arguments)
    command += " '" + argument + "'";
  return command + " 2>" + log;
}

class TopTest : public ::testing::Test {
protected:
  void SetUp() override { ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root"; }

  TempDir dir_;
};

TEST_F(TopTest, TheTerminalShowsTheSplitAndEachKeyDoesWhatItSays)
{
  TempCgroup cgroup;
  Child workload({SPLIT_SORTER_BINARY, "120"}, cgroup.path());
  wait_until_busy(workload.pid(), "split_sorter");
  std::string log = dir_.path().string() + "/top.log";
  Tmux tmux(dir_.path().string(), 80, 24,
            flamebpf_top({"--cgroup", cgroup.path(), "-F", "499", "--interval", "1"}, log));
  ASSERT_TRUE(tmux.wait_for_screen("msort_with_tmp", 30s)) << tmux.screen_text() << read_text(log);
  // Sort by total: the two callers, 3:1, the heavy one above.
  tmux.keys({"o"});
  ASSERT_TRUE(tmux.wait_for_screen("sort: total", 10s));
  std::this_thread::sleep_for(2500ms); // a few refreshes, each an interval of its own
  auto screen = tmux.screen();
  auto heavy = list_row(screen, "heavy_caller");
  auto light = list_row(screen, "light_caller");
  ASSERT_TRUE(heavy && light) << tmux.screen_text();
  EXPECT_LT(heavy->line, light->line) << tmux.screen_text();
  double heavy_share = heavy->total / (heavy->total + light->total);
  EXPECT_NEAR(heavy_share, 0.75, 0.075) << tmux.screen_text();
  for (const auto& row : screen)
    EXPECT_LE(row.size(), 80u * 3) << row; // 80 columns (of up to 3 bytes each)

  // A filter keeps the functions that match.
  tmux.keys({"/", "light", "Enter"});
  ASSERT_TRUE(tmux.wait_for_screen("matching /light/", 10s)) << tmux.screen_text();
  screen = tmux.screen();
  EXPECT_TRUE(list_row(screen, "light_caller")) << tmux.screen_text();
  EXPECT_FALSE(list_row(screen, "heavy_caller")) << tmux.screen_text();
  EXPECT_FALSE(list_row(screen, "msort_with_tmp.part.0")) << tmux.screen_text();

  // The tree of sort_and_copy: its callers at 3:1.
  tmux.keys({"/", "^sort_and_copy$", "Enter"});
  ASSERT_TRUE(tmux.wait_for_screen("matching /\\^sort_and_copy\\$/", 10s)) << tmux.screen_text();
  tmux.keys({"Enter"});
  ASSERT_TRUE(tmux.wait_for_screen("Callers \\(towards the root\\)", 10s)) << tmux.screen_text();
  screen = tmux.screen();
  std::regex tree_line(R"(^\s*([0-9.]+)%\s+(\S+)$)");
  std::map<std::string, std::pair<size_t, double>> callers;
  for (size_t i = 0; i < screen.size(); ++i) {
    std::smatch match;
    if (std::regex_search(screen[i], match, tree_line) && !callers.contains(match[2]))
      callers[match[2]] = {i, std::stod(match[1])};
  }
  ASSERT_TRUE(callers.contains("heavy_caller") && callers.contains("light_caller"))
      << tmux.screen_text();
  EXPECT_LT(callers["heavy_caller"].first, callers["light_caller"].first) << tmux.screen_text();
  EXPECT_NEAR(callers["heavy_caller"].second, 75, 7.5) << tmux.screen_text();
  EXPECT_NEAR(callers["light_caller"].second, 25, 7.5) << tmux.screen_text();
  EXPECT_TRUE(tmux.screen_text().find("Callees (towards the leaves)") != std::string::npos);
  tmux.keys({"Escape"});
  ASSERT_TRUE(tmux.wait_for_screen("SELF%", 10s)) << tmux.screen_text();

  // Pause: the screen holds still while intervals go by.
  tmux.keys({"/", "Enter", "p"});
  ASSERT_TRUE(tmux.wait_for_screen("\\[paused\\]", 10s)) << tmux.screen_text();
  std::string paused = tmux.screen_text();
  std::this_thread::sleep_for(2500ms);
  EXPECT_EQ(tmux.screen_text(), paused);
  tmux.keys({"p"});

  // Save: the data behind the screen as folded stacks and a flame graph.
  tmux.keys({"s"});
  ASSERT_TRUE(tmux.wait_for_screen("saved flamebpf-top-\\S+\\.folded", 10s)) << tmux.screen_text();
  std::smatch saved;
  std::string text = tmux.screen_text();
  ASSERT_TRUE(std::regex_search(text, saved, std::regex(R"(saved (flamebpf-top-\S+)\.folded)")));
  std::string base = dir_.path().string() + "/" + saved[1].str();
  auto folded = read_folded(base + ".folded");
  EXPECT_GT(count_containing(folded, "heavy_caller;sort_and_copy"), 0u) << hottest_stacks(folded);
  auto lint = run_process({"/usr/bin/xmllint", "--noout", base + ".svg"}, {}, 30s);
  EXPECT_EQ(lint.status, 0) << lint.err;
  EXPECT_NE(read_text(base + ".svg").find("heavy_caller"), std::string::npos);

  // Quit.
  tmux.keys({"q"});
  EXPECT_TRUE(wait_until([&] { return !tmux.alive(); }, 10s, "flamebpf top to quit"))
      << tmux.screen_text();
}

TEST_F(TopTest, BatchModeThroughAPipePrintsOneParseableSnapshotPerInterval)
{
  TempCgroup cgroup;
  Child workload({SPLIT_SORTER_BINARY, "60"}, cgroup.path());
  wait_until_busy(workload.pid(), "split_sorter");
  // Standard output is a pipe: snapshots with no --batch needed.
  auto run = run_process({FLAMEBPF_BINARY, "top", "--cgroup", cgroup.path(), "-F", "499",
                          "--interval", "1", "-d", "4.5"},
                         {}, 60s);
  ASSERT_EQ(run.status, 0) << run.err;
  std::regex header(
      R"(^flamebpf top - \S+Z, interval ([0-9.]+) s at 499 Hz, flamebpf ([0-9.]+)% CPU, (\d+) drops)"
      R"(, coverage (\d+%|-)( \(\w+\))?$)");
  std::regex row(R"(^([0-9.]+) ([0-9.]+) (\d+) (JIT|inlined|interp|kernel|native|unknown) (.+)$)");
  std::istringstream lines(run.out);
  int snapshots = 0;
  std::map<std::string, double> last_totals;
  std::string section;
  for (std::string line; std::getline(lines, line);) {
    if (std::regex_match(line, header)) {
      ++snapshots;
      last_totals.clear();
      section = "header";
    } else if (line == "TARGET SAMPLES/S CPU% STATE") {
      section = "targets";
    } else if (line == "SELF% TOTAL% SAMPLES KIND FUNCTION") {
      section = "functions";
    } else if (line.empty()) {
      section.clear();
    } else if (section == "targets") {
      EXPECT_TRUE(std::regex_match(line, std::regex(R"(^\S+ \d+ [0-9.]+ (running|stopped)$)")))
          << line;
    } else if (section == "functions") {
      std::smatch match;
      ASSERT_TRUE(std::regex_match(line, match, row)) << line;
      last_totals[match[5]] = std::stod(match[2]);
    } else {
      ADD_FAILURE() << "unexpected line: " << line;
    }
  }
  EXPECT_GE(snapshots, 4) << run.out;
  EXPECT_LE(snapshots, 6) << run.out;
  ASSERT_TRUE(last_totals.contains("heavy_caller") && last_totals.contains("light_caller"))
      << run.out;
  EXPECT_NEAR(last_totals["heavy_caller"] /
                  (last_totals["heavy_caller"] + last_totals["light_caller"]),
              0.75, 0.075)
      << run.out;
}

TEST_F(TopTest, HostileNamesAndAResizeLeaveTheScreenIntactAndNoEscapeReachesTheTerminal)
{
  TempCgroup cgroup;
  // Names from the process's perf map: 5,000 characters, escape sequences (a title change, a
  // blink, clearing the screen), and bytes that are not UTF-8; its name has an escape too.
  std::string long_name(5000, 'L');
  Child spinner({JIT_SPINNER_BINARY, "--comm", "evil\\x1b[5m", "valid", "Outer" + long_name,
                 "T\\x1b]0;pwned\\x07itle", "B\\x1b[5mBLINKY", "C\\x1b[2JCLEARS",
                 "U\\xff\\xfe\\xc3(bad"},
                cgroup.path(), dir_.path().string() + "/spinner.log");
  ASSERT_TRUE(wait_for_text(dir_.path().string() + "/spinner.log", "spinner ready", 10));
  std::string log = dir_.path().string() + "/top.log";
  Tmux tmux(dir_.path().string(), 80, 24,
            flamebpf_top({"--cgroup", cgroup.path(), "-F", "499", "--interval", "1"}, log));
  std::string raw = dir_.path().string() + "/raw";
  auto piped = tmux.run({"pipe-pane", "-o", "-t", "top", "cat >> " + raw});
  ASSERT_EQ(piped.status, 0) << piped.err;
  ASSERT_TRUE(tmux.wait_for_screen("BLINKY", 30s)) << tmux.screen_text() << read_text(log);
  auto check_screen = [&](size_t columns, size_t rows) {
    auto screen = tmux.screen();
    EXPECT_LE(screen.size(), rows);
    for (const auto& line : screen) {
      // One column per character: every name is cut to the screen, never wrapped.
      size_t characters = 0;
      for (unsigned char byte : line)
        characters += (byte & 0xC0) != 0x80;
      EXPECT_LE(characters, columns) << line;
    }
    std::string text = tmux.screen_text();
    EXPECT_NE(text.find("flamebpf top"), std::string::npos) << text; // the header stays
    EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  };
  check_screen(80, 24);
  std::string text = tmux.screen_text();
  // Each escape is shown as '?', the rest of the name as it is.
  EXPECT_NE(text.find("B?[5mBLINKY"), std::string::npos) << text;
  EXPECT_NE(text.find("T?]0;pwned?itle"), std::string::npos) << text;
  EXPECT_NE(text.find("U?\?\?(bad"), std::string::npos) << text;
  EXPECT_NE(text.find("OuterLLLL"), std::string::npos) << text;

  // Resized mid-run to 40x10.
  auto resized = tmux.run({"resize-window", "-t", "top", "-x", "40", "-y", "10"});
  ASSERT_EQ(resized.status, 0) << resized.err;
  std::this_thread::sleep_for(2500ms);
  check_screen(40, 10);
  auto title = tmux.run({"display-message", "-p", "-t", "top", "#{pane_title}"});
  EXPECT_EQ(title.out.find("pwned"), std::string::npos) << title.out;
  // The terminal goes away (as an SSH connection drops): flamebpf ends with it.
  auto pane = tmux.run({"display-message", "-p", "-t", "top", "#{pane_pid}"});
  pid_t flamebpf = std::stoi(pane.out);
  tmux.run({"kill-server"});
  EXPECT_TRUE(wait_until([&] { return ::kill(flamebpf, 0) != 0; }, 10s,
                         "flamebpf top to end with its terminal"));

  // Of the bytes flamebpf wrote to the terminal, none is a name's escape sequence.
  std::string bytes = read_text(raw);
  ASSERT_FALSE(bytes.empty());
  for (const std::string& forbidden :
       {std::string("\x1b]0;pwned"), std::string("\x1b[5mBLINKY"), std::string("\x1b[2JCLEARS"),
        std::string("\xff\xfe"), std::string("evil\x1b")})
    EXPECT_EQ(bytes.find(forbidden), std::string::npos) << "a name's bytes reached the terminal";
}

} // namespace
} // namespace flamebpf::testing
