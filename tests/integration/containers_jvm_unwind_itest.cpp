// Complete Java stacks from JVMs in real containers started with no profiling flag at all: the
// sampler unwinds compiled code by the frame sizes flamebpf's agent records, and names
// interpreted frames by their Method*. JDK 17 and JDK 25, without and with
// -XX:+PreserveFramePointer (both paths), and a JVM whose records file is garbage.

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <regex>
#include <unistd.h>

#include "container_harness.h"
#include "dumps/dump_files.h"
#include "harness.h"
#include "process.h"
#include "wait.h"

namespace flamebpf::testing {
namespace {

namespace fs = std::filesystem;

// Two callers of one compiled method, slow calling it twice as often as fast, and a method
// -XX:CompileCommand keeps interpreted. The three others are kept from being inlined (into each
// other, or into main's loop), so that each is a frame of its own.
constexpr const char* kWorkload = R"(public class Frames {
  static volatile long sink;
  static long work(long n) { long s = 0; for (long i = 0; i < n; i++) s += i * 31 ^ (s >>> 3); return s; }
  static void slow() { sink += work(20000); sink += work(20000); }
  static void fast() { sink += work(20000); }
  static void interpreted(int n) { for (int i = 0; i < n; i++) sink += i * (long) i; }
  public static void main(String[] args) throws Exception {
    long end = System.nanoTime() + 60_000_000_000L;
    boolean ready = false;
    for (long calls = 0; System.nanoTime() < end; calls++) {
      slow(); fast(); interpreted(500);
      if (!ready && calls == 20000) { System.out.println("frames ready"); ready = true; }
    }
  }
}
)";

struct Shares {
  uint64_t java = 0;         // samples of the process "java"
  uint64_t rooted = 0;       // of those, reaching JavaMain or a thread's entry
  uint64_t through_slow = 0; // through Frames.slow to Frames.work
  uint64_t through_fast = 0;
  uint64_t interpreted = 0; // with the interpreted method, unsuffixed
  std::string hottest;
};

Shares shares(const std::map<std::string, uint64_t>& folded)
{
  Shares out;
  for (const auto& [stack, count] : folded) {
    if (!stack.starts_with("java;"))
      continue;
    out.java += count;
    if (stack.find(";JavaMain;") != std::string::npos ||
        stack.find(";thread_native_entry;") != std::string::npos ||
        stack.find(";start_thread;") != std::string::npos)
      out.rooted += count;
    // Compiled or inlined, each of them: the JIT decides.
    static const std::regex slow(R"(Frames\.slow_\[[ji]\];Frames\.work_\[[ji]\])");
    static const std::regex fast(R"(Frames\.fast_\[[ji]\];Frames\.work_\[[ji]\])");
    if (std::regex_search(stack, slow))
      out.through_slow += count;
    if (std::regex_search(stack, fast))
      out.through_fast += count;
    if (stack.find(";Frames.interpreted;") != std::string::npos ||
        stack.ends_with(";Frames.interpreted"))
      out.interpreted += count;
  }
  out.hottest = hottest_stacks(folded, 5);
  return out;
}

class JvmUnwindContainerTest : public ::testing::TestWithParam<std::tuple<JavaVersion, bool>> {
protected:
  void SetUp() override
  {
    ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
    if (std::get<0>(GetParam()) == JavaVersion::kJdk25 && !jdk25_available())
      GTEST_SKIP() << "JDK 25 is not installed at " << host_jdk_home(JavaVersion::kJdk25);
    fs::permissions(dir_.path(), fs::perms(0755));
    std::ofstream(dir_.path() / "Frames.java") << kWorkload;
    auto javac = run_process({host_jdk_home(JavaVersion::kJdk17) + "/bin/javac", "--release", "17",
                              "-d", dir_.path().string(), (dir_.path() / "Frames.java").string()},
                             {}, std::chrono::seconds(120));
    ASSERT_EQ(javac.status, 0) << javac.err;
    fs::permissions(dir_.path() / "Frames.class", fs::perms(0644));
  }

  // Runs the workload in container name, with java_options, and waits until it is warm.
  Container start(const std::string& name, const std::vector<std::string>& java_options)
  {
    std::vector<std::string> command{std::string(kContainerJavaHome) + "/bin/java"};
    command.insert(command.end(), java_options.begin(), java_options.end());
    command.insert(command.end(),
                   {"-XX:CompileCommand=quiet", "-XX:CompileCommand=exclude,Frames::interpreted",
                    "-XX:CompileCommand=dontinline,Frames::work",
                    "-XX:CompileCommand=dontinline,Frames::slow",
                    "-XX:CompileCommand=dontinline,Frames::fast", "-cp", "/frames", "Frames"});
    auto container = docker_.run(name, {"-v", dir_.path().string() + ":/frames:ro"},
                                 docker_.java_image(std::get<0>(GetParam())), command);
    docker_.wait_for_output(name, "frames ready");
    return container;
  }

  // Profiles container name for seconds. The first profile of a JVM attaches the agent, which
  // starts its records as it loads; the records of the code that exists already follow.
  Shares profile(const std::string& name, int seconds, const std::vector<std::string>& extra = {})
  {
    std::string out = dir_.path().string() + "/" + name + ".folded";
    // At 999 Hz, the split's two sides have thousands of samples: 10 % is several standard
    // errors of their ratio.
    std::vector<std::string> args{"--cgroup", name, "-F", "999", "-d", std::to_string(seconds),
                                  "-o",       out};
    args.insert(args.end(), extra.begin(), extra.end());
    auto result = run_flamebpf(args);
    EXPECT_EQ(result.exit_code, 0) << result.output;
    log_ = result.output;
    return shares(read_folded(out));
  }

  // Profiles container name in windows of 2 s and sums all but the first: the stacks once flamebpf
  // has read the JVM's records and loaded its tables, however long its start took (as under a
  // sanitizer).
  Shares profile_settled(const std::string& name, int seconds)
  {
    std::string out = dir_.path().string() + "/" + name + "-dumps";
    auto result = run_flamebpf({"--cgroup", name, "-F", "999", "--output-dir", out, "--interval",
                                "2", "-d", std::to_string(seconds)});
    EXPECT_EQ(result.exit_code, 0) << result.output;
    log_ = result.output;
    std::string target = out + "/" + dumps::target_directory(name);
    auto windows = dumps::list_dumps(target);
    EXPECT_GE(windows.size(), 3u) << target << "\n" << log_;
    std::map<std::string, uint64_t> settled;
    for (size_t i = 1; i < windows.size(); ++i) {
      for (const auto& [stack, count] : read_folded(target + "/" + windows[i].files[0]))
        settled[stack] += count;
    }
    return shares(settled);
  }

  // Waits until the agent in the JVM with this host pid has named the workload's methods; the
  // records' path.
  std::string wait_for_records(pid_t pid)
  {
    std::string records = "/proc/" + std::to_string(pid) + "/root/tmp/flamebpf-1.unwind";
    wait_until(
        [&] {
          std::ifstream in(records);
          std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
          return text.find(" Frames.interpreted(int)\n") != std::string::npos;
        },
        std::chrono::seconds(30), "the agent's records of the workload");
    return records;
  }

  void expect_complete(const Shares& got)
  {
    ASSERT_GT(got.java, 200u) << log_;
    EXPECT_GE(got.rooted * 100, got.java * 95) << got.hottest << log_;
    ASSERT_GT(got.through_fast, 20u) << got.hottest;
    double ratio = static_cast<double>(got.through_slow) / static_cast<double>(got.through_fast);
    EXPECT_NEAR(ratio, 2.0, 0.2) << got.hottest;
    EXPECT_GT(got.interpreted, 0u) << got.hottest;
    std::printf("[ FIGURES  ] %llu java samples, %.1f%% rooted, slow:fast %.2f, %llu in the "
                "interpreted method\n",
                static_cast<unsigned long long>(got.java),
                100.0 * static_cast<double>(got.rooted) / static_cast<double>(got.java), ratio,
                static_cast<unsigned long long>(got.interpreted));
  }

  DockerDaemon docker_;
  TempDir dir_{"/var/tmp", fs::perms(0755)};
  std::string log_;
};

TEST_P(JvmUnwindContainerTest, CompleteStacksWithTheSplitRight)
{
  bool frame_pointers = std::get<1>(GetParam());
  std::vector<std::string> options;
  if (frame_pointers)
    options.push_back("-XX:+PreserveFramePointer");
  std::string name = frame_pointers ? "frames-fp" : "frames-nofp";
  auto jvm = start(name, options);
  profile(name, 2); // attaches the agent
  wait_for_records(jvm.pid);
  expect_complete(profile_settled(name, 8));
  EXPECT_EQ(log_.find("runs without -XX:+PreserveFramePointer"), std::string::npos) << log_;
}

// A container that writes garbage into its JVM's records (the file is in its /tmp): flamebpf
// neither crashes nor believes it, counts it, and the stacks are what frame pointers give.
TEST_P(JvmUnwindContainerTest, GarbageRecordsAreCountedAndStacksStayAsFramePointersGive)
{
  if (!std::get<1>(GetParam()))
    GTEST_SKIP() << "only with frame pointers: they are what the stacks fall back to";
  std::vector<std::string> java_options{"-XX:+PreserveFramePointer"};
  std::string name = "frames-garbage";
  auto jvm = start(name, java_options);
  profile(name, 2); // attaches the agent, which starts the records
  std::string records = wait_for_records(jvm.pid);
  ASSERT_TRUE(fs::exists(records)) << log_;
  {
    std::ofstream garbage(records, std::ios::app);
    garbage << "code 1000 ffffffff 99999 0 none 0 0\n"         // outside any code, huge frame
            << "code 7f0000000000 100000 4000 0 push 1 2\n"    // a frame beyond any real one
            << "interpreter 0 ffffffffffffffff\n"              // the whole address space
            << "method 1 " << std::string(100000, 'x') << "\n" // a name beyond the line budget
            << "code zz\n\x01\x02\xff garbage\n";
  }
  auto second = profile(name, 4);
  ASSERT_GT(second.java, 200u) << log_;
  EXPECT_NE(log_.find("malformed unwind records"), std::string::npos) << log_;
  // What frame pointers alone give the same JVM.
  auto frame_pointers_only = profile(name, 4, {"--unwind-memory", "0"});
  ASSERT_GT(frame_pointers_only.java, 200u) << log_;
  double share = static_cast<double>(second.rooted) / static_cast<double>(second.java);
  double baseline = static_cast<double>(frame_pointers_only.rooted) /
                    static_cast<double>(frame_pointers_only.java);
  EXPECT_GE(share, baseline - 0.03) << second.hottest;
  std::printf("[ FIGURES  ] garbage records: %.1f%% of java samples rooted; frame pointers alone: "
              "%.1f%%\n",
              100 * share, 100 * baseline);
}

INSTANTIATE_TEST_SUITE_P(JdksAndFramePointers,
                         JvmUnwindContainerTest,
                         ::testing::Combine(::testing::Values(JavaVersion::kJdk17,
                                                              JavaVersion::kJdk25),
                                            ::testing::Bool()));

} // namespace
} // namespace flamebpf::testing
