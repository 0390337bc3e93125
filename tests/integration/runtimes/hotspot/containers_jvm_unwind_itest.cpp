// Complete Java stacks from JVMs in real containers started with no profiling flag at all: the
// sampler unwinds compiled code by the frame sizes flamebpf's agent records, and names
// interpreted frames by their Method*. JDK 17 and JDK 25, without and with
// -XX:+PreserveFramePointer (both paths), and a JVM whose records file is garbage.

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <regex>
#include <stdexcept>
#include <string>
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
// -XX:CompileCommand keeps interpreted. The others are kept from being inlined (into each
// other, or into main's loop), so that each is a frame of its own. work calls step, a method of
// a few instructions, at each turn of its loop: many of the samples in step stand in its prologue
// or epilogue, where the frame is being built or taken down. Given a number of seconds, main also
// calls late, never called before, from that long after "frames ready" on: code compiled while
// flamebpf runs.
constexpr const char* kWorkload = R"(public class Frames {
  static volatile long sink;
  static long step(long i, long s) { return i * 31 ^ (s >>> 3); }
  static long work(long n) { long s = 0; for (long i = 0; i < n; i++) s += step(i, s); return s; }
  static void slow() { sink += work(20000); sink += work(20000); }
  static void fast() { sink += work(20000); }
  static void interpreted(int n) { for (int i = 0; i < n; i++) sink += i * (long) i; }
  static long late(long n) { long s = 1; for (long i = 0; i < n; i++) s = s * 7 + (i ^ (s >>> 5)); return s; }
  public static void main(String[] args) throws Exception {
    long end = System.nanoTime() + 60_000_000_000L;
    long lateAt = Long.MAX_VALUE;
    boolean ready = false;
    for (long calls = 0; System.nanoTime() < end; calls++) {
      slow(); fast(); interpreted(500);
      if (System.nanoTime() > lateAt) sink += late(20000);
      if (!ready && calls == 20000) {
        System.out.println("frames ready");
        ready = true;
        if (args.length > 0) lateAt = System.nanoTime() + (long) (Double.parseDouble(args[0]) * 1e9);
      }
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
  uint64_t main_thread = 0; // of the java samples, those of the thread that runs main
  uint64_t named_leaf = 0;  // of those, samples whose innermost frame is a named Java method
  uint64_t through_late = 0;
  uint64_t in_step = 0;        // samples whose innermost Java frame is Frames.step, compiled
  uint64_t in_step_rooted = 0; // of those, reaching JavaMain
  std::string hottest;
};

// The stacks of windows [first, end) summed.
std::map<std::string, uint64_t>
summed(const std::vector<std::map<std::string, uint64_t>>& windows, size_t first, size_t end)
{
  std::map<std::string, uint64_t> sum;
  for (size_t i = first; i < end && i < windows.size(); ++i) {
    for (const auto& [stack, count] : windows[i])
      sum[stack] += count;
  }
  return sum;
}

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
    if (stack.find(";JavaMain;") != std::string::npos) {
      out.main_thread += count;
      // "Frames.work_[j]", or an interpreted method unsuffixed; not "Interpreter", a stub or a
      // library's function.
      static const std::regex java_leaf(R"(;[\w$]+(\.[\w$<>]+)+(_\[[ji]\])?$)");
      if (std::regex_search(stack, java_leaf))
        out.named_leaf += count;
    }
    if (stack.find(";Frames.late_[j]") != std::string::npos)
      out.through_late += count;
    static const std::regex in_step(R"(;Frames\.step_\[j\](;[^;]*_\[k\])*$)");
    if (std::regex_search(stack, in_step)) {
      out.in_step += count;
      if (stack.find(";JavaMain;") != std::string::npos)
        out.in_step_rooted += count;
    }
  }
  out.hottest = hottest_stacks(folded, 5);
  return out;
}

// What a hardened JVM's settled windows must show: at least 95 % of the main thread's samples end
// in a named Java method, and Frames.slow has twice Frames.fast's samples, within 10 %. Returns
// slow:fast.
double expect_named_with_the_split(const Shares& got, const std::string& log)
{
  EXPECT_GT(got.main_thread, 500u) << log;
  EXPECT_GE(got.named_leaf * 100, got.main_thread * 95) << got.hottest << log;
  EXPECT_GT(got.through_fast, 20u) << got.hottest << log;
  double ratio = got.through_fast == 0 ? 0.0
                                       : static_cast<double>(got.through_slow) /
                                             static_cast<double>(got.through_fast);
  EXPECT_NEAR(ratio, 2.0, 0.2) << got.hottest;
  return ratio;
}

// The directory holding the workload's class, compiled once for the program's tests, whose
// containers mount it at /frames. Throws std::runtime_error if javac fails.
const std::string& frames_classes()
{
  static TempDir dir{"/var/tmp", fs::perms(0755)};
  static const std::string path = [] {
    std::ofstream(dir.path() / "Frames.java") << kWorkload;
    auto javac = run_process({host_jdk_home(JavaVersion::kJdk17) + "/bin/javac", "--release", "17",
                              "-d", dir.path().string(), (dir.path() / "Frames.java").string()},
                             {}, std::chrono::seconds(120));
    if (javac.status != 0)
      throw std::runtime_error("javac Frames.java failed: " + javac.err);
    fs::permissions(dir.path() / "Frames.class", fs::perms(0644));
    return dir.path().string();
  }();
  return path;
}

class JvmUnwindContainerTest : public ::testing::TestWithParam<std::tuple<JavaVersion, bool>> {
protected:
  void SetUp() override
  {
    ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
    if (std::get<0>(GetParam()) == JavaVersion::kJdk25 && !jdk25_available())
      GTEST_SKIP() << "JDK 25 is not installed at " << host_jdk_home(JavaVersion::kJdk25);
  }

  // Runs the workload in container name, with java_options, and waits until it is warm. With
  // docker_options added to the container's, with Frames.interpreted compiled as the JIT pleases
  // unless keep_interpreted, with main's arguments, and in an image with tools.
  Container start(const std::string& name,
                  const std::vector<std::string>& java_options,
                  const std::vector<std::string>& docker_options = {},
                  bool keep_interpreted = true,
                  const std::vector<std::string>& main_args = {},
                  JavaImageTools tools = JavaImageTools::kShellSleepAndCat)
  {
    std::vector<std::string> command{std::string(kContainerJavaHome) + "/bin/java"};
    command.insert(command.end(), java_options.begin(), java_options.end());
    command.push_back("-XX:CompileCommand=quiet");
    if (keep_interpreted)
      command.push_back("-XX:CompileCommand=exclude,Frames::interpreted");
    command.insert(
        command.end(),
        {"-XX:CompileCommand=dontinline,Frames::work", "-XX:CompileCommand=dontinline,Frames::slow",
         "-XX:CompileCommand=dontinline,Frames::fast", "-XX:CompileCommand=dontinline,Frames::late",
         "-XX:CompileCommand=dontinline,Frames::step", "-cp", "/frames", "Frames"});
    command.insert(command.end(), main_args.begin(), main_args.end());
    std::vector<std::string> options{"-v", frames_classes() + ":/frames:ro"};
    options.insert(options.end(), docker_options.begin(), docker_options.end());
    auto container =
        docker_.run(name, options, docker_.java_image(std::get<0>(GetParam()), tools), command);
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

  // Profiles container name in windows of 1 s and sums all but the first: the stacks once flamebpf
  // has read the JVM's records and loaded its tables, however long its start took (as under a
  // sanitizer). Six settled seconds at 999 Hz keep the split's 10 % at nearly four standard errors.
  Shares profile_settled(const std::string& name, int seconds)
  {
    auto windows = profile_windows(name, seconds, 1);
    return shares(summed(windows, 1, windows.size()));
  }

  // Profiles container name in windows of window_seconds: each window's folded stacks, in order.
  std::vector<std::map<std::string, uint64_t>>
  profile_windows(const std::string& name, int seconds, int window_seconds = 2)
  {
    std::string out = dir_.path().string() + "/" + name + "-dumps";
    auto result = run_flamebpf({"--cgroup", name, "-F", "999", "--output-dir", out, "--interval",
                                std::to_string(window_seconds), "-d", std::to_string(seconds)});
    EXPECT_EQ(result.exit_code, 0) << result.output;
    log_ = result.output;
    std::string target = out + "/" + dumps::target_directory(name);
    auto windows = dumps::list_dumps(target);
    EXPECT_GE(windows.size(), 3u) << target << "\n" << log_;
    std::vector<std::map<std::string, uint64_t>> folded;
    for (const auto& window : windows)
      folded.push_back(read_folded(target + "/" + window.files[0]));
    return folded;
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
    // A sample in a method's epilogue, where its frame is half taken down, is unwound as surely
    // as one in its body: a third of step's samples are there (62 % and 72 % of them reached
    // main when epilogues were not told apart, JDK 17 and 25). Code the JIT compiles again while
    // flamebpf runs unwinds by frame pointers until its records are read, which cost up to 2.5 %.
    ASSERT_GT(got.in_step, 100u) << got.hottest;
    EXPECT_GE(got.in_step_rooted * 100, got.in_step * 95) << got.hottest;
    std::printf("[ FIGURES  ] %llu java samples, %.1f%% rooted, slow:fast %.2f, %llu in the "
                "interpreted method, %llu in Frames.step (%.1f%% rooted)\n",
                static_cast<unsigned long long>(got.java),
                100.0 * static_cast<double>(got.rooted) / static_cast<double>(got.java), ratio,
                static_cast<unsigned long long>(got.interpreted),
                static_cast<unsigned long long>(got.in_step),
                100.0 * static_cast<double>(got.in_step_rooted) / static_cast<double>(got.in_step));
  }

  DockerDaemon& docker_ = DockerDaemon::shared();
  ContainersRemovedAtEnd containers_removed_{docker_};
  TempDir dir_{"/var/tmp"};
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
  expect_complete(profile_settled(name, 7));
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

// Containers run the hardened way. Each test needs frame pointers (nothing but HotSpot names the
// code) or is about doing without them, so each runs with that one setting, on both JDKs.
class HardenedJvmContainerTest : public JvmUnwindContainerTest {};
class HardenedJvmWithoutFramePointersTest : public JvmUnwindContainerTest {};

// A container run the hardened way, with a read-only root and a noexec tmpfs on /tmp (Docker's
// default): the agent has nowhere it could load from, so HotSpot writes its perf map on request,
// and again once samples meet code compiled after that (Frames.late).
TEST_P(HardenedJvmContainerTest, NamedByThePerfMapHotSpotWrites)
{
  std::string name = "frames-hardened";
  auto jvm =
      start(name, {"-XX:+PreserveFramePointer"}, {"--read-only", "--tmpfs", "/tmp"}, false, {"5"});
  auto windows = profile_windows(name, 14);
  ASSERT_GE(windows.size(), 5u) << log_;
  EXPECT_NE(log_.find("named by the perf map HotSpot writes on request"), std::string::npos)
      << log_;
  EXPECT_NE(log_.find("mounted noexec"), std::string::npos) << log_;
  EXPECT_EQ(log_.find("loaded flamebpf's agent"), std::string::npos) << log_;
  // Every window but the first: before, during and after Frames.late is compiled.
  auto got = shares(summed(windows, 1, windows.size()));
  double ratio = expect_named_with_the_split(got, log_);
  // The last two windows: Frames.late was compiled after HotSpot first wrote the map.
  auto late = shares(summed(windows, windows.size() - 2, windows.size()));
  ASSERT_GT(late.main_thread, 200u) << log_;
  EXPECT_GE(late.named_leaf * 100, late.main_thread * 95) << late.hottest << log_;
  EXPECT_GT(late.through_late * 10, late.main_thread) << late.hottest;
  // Nothing of flamebpf's was left in the container.
  for (const auto& entry : fs::directory_iterator("/proc/" + std::to_string(jvm.pid) + "/root/tmp"))
    EXPECT_FALSE(entry.path().filename().string().starts_with("libflamebpf")) << entry.path();
  std::printf(
      "[ FIGURES  ] hardened: %llu samples of the main thread settled, %.1f%% ending in a "
      "named Java method, slow:fast %.2f; last windows: %.1f%% named, %.1f%% in "
      "Frames.late\n",
      static_cast<unsigned long long>(got.main_thread),
      100.0 * static_cast<double>(got.named_leaf) / static_cast<double>(got.main_thread), ratio,
      100.0 * static_cast<double>(late.named_leaf) / static_cast<double>(late.main_thread),
      100.0 * static_cast<double>(late.through_late) / static_cast<double>(late.main_thread));
}

// A container with a read-only root, no writable /tmp at all and no shell (a distroless image):
// HotSpot cannot create its attach socket, so neither the agent nor HotSpot's own perf map can
// name the JIT frames, and nothing can be run in the container. flamebpf reads them from outside,
// from the JVM's code cache, including code compiled during the run.
TEST_P(HardenedJvmContainerTest, ReadOnlyRootIsNamedFromOutside)
{
  std::string name = "frames-read-only";
  auto jvm = start(name, {"-XX:+PreserveFramePointer"}, {"--read-only"}, false, {"5"},
                   JavaImageTools::kNone);
  std::string root = "/proc/" + std::to_string(jvm.pid) + "/root";
  for (const char* shell : {"/bin/sh", "/usr/bin/sh", "/bin/dash", "/usr/bin/dash"})
    EXPECT_FALSE(fs::exists(fs::symlink_status(root + shell))) << shell << " is in the container";
  EXPECT_NE(::access((root + "/tmp").c_str(), W_OK), 0) << "the container's /tmp is writable";
  auto windows = profile_windows(name, 12);
  ASSERT_GE(windows.size(), 5u) << log_;
  EXPECT_NE(log_.find("nor can HotSpot write its perf map"), std::string::npos) << log_;
  EXPECT_NE(log_.find("its JIT-compiled frames are named from outside it"), std::string::npos)
      << log_;
  EXPECT_EQ(log_.find("cannot be read from outside"), std::string::npos) << log_;
  auto got = shares(summed(windows, 1, windows.size()));
  double ratio = expect_named_with_the_split(got, log_);
  EXPECT_GT(got.through_late * 20, got.main_thread) << got.hottest;
  std::printf("[ FIGURES  ] read-only: %llu samples of the main thread settled, %.1f%% ending in a "
              "named Java method, slow:fast %.2f, %.1f%% in Frames.late\n",
              static_cast<unsigned long long>(got.main_thread),
              100.0 * static_cast<double>(got.named_leaf) / static_cast<double>(got.main_thread),
              ratio,
              100.0 * static_cast<double>(got.through_late) / static_cast<double>(got.main_thread));
}

// A hardened container whose only writable, exec-able directory is a volume of its own: the
// agent is loaded from there (found in the JVM's mountinfo) and removed from it once loaded, and
// the stacks are complete without frame pointers.
TEST_P(HardenedJvmWithoutFramePointersTest, VolumeTakesTheAgent)
{
  std::string name = "frames-volume";
  auto jvm = start(name, {}, {"--read-only", "--tmpfs", "/tmp", "--tmpfs", "/scratch:exec"});
  profile(name, 2); // attaches the agent
  EXPECT_NE(log_.find("loaded flamebpf's agent from /scratch/libflamebpf-agent-"),
            std::string::npos)
      << log_;
  wait_for_records(jvm.pid);
  expect_complete(profile_settled(name, 7));
  std::vector<std::string> left;
  for (const auto& entry :
       fs::directory_iterator("/proc/" + std::to_string(jvm.pid) + "/root/scratch"))
    left.push_back(entry.path().filename());
  EXPECT_TRUE(left.empty()) << ::testing::PrintToString(left);
}

// Names such as Jdk17WithoutFramePointers, for filters (tests/CMakeLists.txt's plain_only).
std::string
jdk_and_frame_pointers(const ::testing::TestParamInfo<std::tuple<JavaVersion, bool>>& info)
{
  return std::string(std::get<0>(info.param) == JavaVersion::kJdk17 ? "Jdk17" : "Jdk25") +
         (std::get<1>(info.param) ? "WithFramePointers" : "WithoutFramePointers");
}

INSTANTIATE_TEST_SUITE_P(JdksAndFramePointers,
                         JvmUnwindContainerTest,
                         ::testing::Combine(::testing::Values(JavaVersion::kJdk17,
                                                              JavaVersion::kJdk25),
                                            ::testing::Bool()),
                         jdk_and_frame_pointers);
INSTANTIATE_TEST_SUITE_P(Jdks,
                         HardenedJvmContainerTest,
                         ::testing::Values(std::make_tuple(JavaVersion::kJdk17, true),
                                           std::make_tuple(JavaVersion::kJdk25, true)),
                         jdk_and_frame_pointers);
INSTANTIATE_TEST_SUITE_P(Jdks,
                         HardenedJvmWithoutFramePointersTest,
                         ::testing::Values(std::make_tuple(JavaVersion::kJdk17, false),
                                           std::make_tuple(JavaVersion::kJdk25, false)),
                         jdk_and_frame_pointers);

} // namespace
} // namespace flamebpf::testing
