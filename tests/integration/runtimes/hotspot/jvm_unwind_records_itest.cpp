// The agent's unwind records (/tmp/flamebpf-<pid>.unwind) from real JVMs, JDK 17 and JDK 25,
// started with no flag but the agent: every compiled method of the workload has a record whose
// frame size the code's own prologue confirms, and which the JDK's own debugger (jhsdb clhsdb's
// findpc) reads the same; the interpreter's range is recorded, and the method kept interpreted
// is named.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <regex>
#include <sstream>
#include <unistd.h>

#include "harness.h"
#include "process.h"
#include "temp_dir.h"
#include "wait.h"

namespace flamebpf::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr const char* kJdk17 = "/usr/lib/jvm/java-17-openjdk-amd64";
constexpr const char* kJdk25 = "/usr/lib/jvm/temurin-25-jdk-amd64";

// Two callers of one compiled method, and a method that -XX:CompileCommand keeps interpreted.
constexpr const char* kWorkload = R"(public class Frames {
  static volatile long sink;
  static long work(long n) { long s = 0; for (long i = 0; i < n; i++) s += i * 31 ^ (s >>> 3); return s; }
  static void slow() { sink += work(20000); sink += work(20000); }
  static void fast() { sink += work(20000); }
  static void interpreted(int n) { for (int i = 0; i < n; i++) sink += i; }
  public static void main(String[] args) throws Exception {
    for (int i = 0; i < 20000; i++) { slow(); fast(); interpreted(100); }
    System.out.println("ready " + ProcessHandle.current().pid());
    System.out.flush();
    Thread.sleep(600_000);
  }
}
)";

std::string read_all(const std::string& path)
{
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class JvmUnwindRecords : public ::testing::TestWithParam<const char*> {
protected:
  void SetUp() override
  {
    ASSERT_EQ(::geteuid(), 0u) << "jhsdb attaches with ptrace: run as root";
    if (!fs::exists(fs::path(GetParam()) / "bin/java"))
      GTEST_SKIP() << GetParam() << " is not installed";
    std::ofstream(dir_.path() / "Frames.java") << kWorkload;
    auto javac = run_process({std::string(kJdk17) + "/bin/javac", "--release", "17", "-d",
                              dir_.path().string(), (dir_.path() / "Frames.java").string()},
                             {}, 120s);
    ASSERT_EQ(javac.status, 0) << javac.err;
  }

  void TearDown() override
  {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      wait_child(pid_, 10s);
    }
    if (jvm_pid_ > 0) {
      fs::remove("/tmp/flamebpf-" + std::to_string(jvm_pid_) + ".unwind");
      fs::remove("/tmp/perf-" + std::to_string(jvm_pid_) + ".map");
    }
  }

  TempDir dir_{"/var/tmp", fs::perms(0755)};
  pid_t pid_ = -1;
  int jvm_pid_ = -1;
};

TEST_P(JvmUnwindRecords, FrameSizesAgreeWithTheCodeAndTheJdksDebugger)
{
  std::string java_home = GetParam();
  std::string out = (dir_.path() / "out.txt").string();
  UniqueFd output = open_output_file(out);
  SpawnOptions options;
  options.output = output.get();
  pid_ = spawn({java_home + "/bin/java", "-agentpath:" + std::string(FLAMEBPF_AGENT_LIBRARY),
                "-XX:CompileCommand=quiet", "-XX:CompileCommand=exclude,Frames::interpreted", "-cp",
                dir_.path().string(), "Frames"},
               options);
  // The match points into the text it was found in, so the text outlives the wait.
  std::string printed;
  std::smatch ready;
  static const std::regex ready_line("ready ([0-9]+)");
  ASSERT_TRUE(wait_until(
      [&] {
        printed = read_all(out);
        return std::regex_search(printed, ready, ready_line);
      },
      60s, "the workload to warm up"));
  jvm_pid_ = std::stoi(ready[1]);
  std::string records = read_all("/tmp/flamebpf-" + std::to_string(jvm_pid_) + ".unwind");
  std::string map = read_all("/tmp/perf-" + std::to_string(jvm_pid_) + ".map");
  ASSERT_TRUE(records.starts_with("flamebpf-unwind 1\n")) << records.substr(0, 200);
  EXPECT_NE(records.find("\ninterpreter "), std::string::npos);
  // The method kept interpreted is named for interpreter frames, with the perf map's spelling.
  EXPECT_NE(records.find(" Frames.interpreted(int)\n"), std::string::npos);

  // Where the workload's compiled code starts: the perf map names each method's code from its
  // start (and pieces of it, where methods were inlined, from later addresses).
  std::map<std::string, std::string> compiled; // start (hex) -> name
  static const std::regex map_line("([0-9a-f]+) [0-9a-f]+ (Frames\\..*)");
  std::istringstream lines(map);
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    if (std::regex_match(line, match, map_line))
      compiled.try_emplace(match[1], match[2]);
  }
  ASSERT_FALSE(compiled.empty()) << map;
  std::map<std::string, uint32_t> frame_words;
  size_t confirmed = 0;
  static const std::regex code_line(
      "code ([0-9a-f]+) ([0-9a-f]+) ([0-9]+) (-?[0-9]+) (push|save|none) ([0-9a-f]+) ([0-9a-f]+)");
  std::istringstream record_lines(records);
  for (std::string line; std::getline(record_lines, line);) {
    std::smatch match;
    if (!std::regex_match(line, match, code_line) || !compiled.contains(match[1]))
      continue;
    uint32_t words = static_cast<uint32_t>(std::stoul(match[3]));
    frame_words[match[1]] = words;
    EXPECT_GE(words, 2u) << line;  // a return address and the saved rbp at least
    EXPECT_LE(words, 64u) << line; // these methods keep a few locals
    confirmed += match[5] != "none";
  }
  // work, and its callers unless they were inlined into the loop in main.
  EXPECT_GE(frame_words.size(), 2u) << "compiled methods without a record\n" << map;
  // The prologue's sub confirms the frame size (it is looked for only where the sizes agree).
  EXPECT_EQ(confirmed, frame_words.size()) << records;

  // jhsdb reads the same nmethods from outside the JVM, through its own reader of HotSpot's
  // structures; it says each one's frame size in bytes.
  std::string commands;
  for (const auto& [start, words] : frame_words)
    commands += "findpc 0x" + start + "\n";
  commands += "quit\n";
  std::string script = (dir_.path() / "clhsdb.txt").string();
  std::ofstream(script) << commands;
  auto debugger = run_process(
      {"/bin/sh", "-c",
       java_home + "/bin/jhsdb clhsdb --pid " + std::to_string(jvm_pid_) + " < " + script},
      {}, 120s);
  ASSERT_EQ(debugger.status, 0) << debugger.err;
  static const std::regex found(
      "Address 0x0*([0-9a-f]+): In code in NMethod.*frame size: ([0-9]+)");
  size_t compared = 0;
  for (auto it = std::sregex_iterator(debugger.out.begin(), debugger.out.end(), found);
       it != std::sregex_iterator(); ++it) {
    std::string start = (*it)[1];
    ASSERT_TRUE(frame_words.contains(start)) << start;
    EXPECT_EQ(frame_words[start] * 8, std::stoul((*it)[2])) << compiled[start];
    ++compared;
  }
  EXPECT_EQ(compared, frame_words.size()) << debugger.out;
  std::printf("[ FIGURES  ] %s: %zu compiled methods of the workload, %zu prologues confirm "
              "their frame size, %zu agree with jhsdb\n",
              java_home.c_str(), frame_words.size(), confirmed, compared);
}

INSTANTIATE_TEST_SUITE_P(Jdks, JvmUnwindRecords, ::testing::Values(kJdk17, kJdk25));

} // namespace
} // namespace flamebpf::testing
