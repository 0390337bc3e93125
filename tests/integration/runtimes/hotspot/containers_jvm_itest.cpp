// flamebpf against JVMs in real Docker containers, started with nothing but
// -XX:+PreserveFramePointer: Java frames named through the automatically attached agent (or one
// loaded with -agentpath), as root, as another user, as a non-PID-1 process, on JDK 17 and 25,
// across a recompilation and past the JVM's exit; and a container that plants a symlink at its
// perf map, which the agent replaces by a map of its own.
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <regex>
#include <set>
#include <signal.h>
#include <sstream>
#include <thread>
#include <unistd.h>

#include "container_harness.h"
#include "harness.h"

namespace flamebpf::testing {
namespace {

namespace fs = std::filesystem;

// The hot chain of tests/progs/Burner.java as flamebpf names it, root to leaf.
constexpr const char* kJavaChain = "Burner.run_[j];Burner.a_[j];Burner.b_[j];Burner.c_[j]";

// Files the JVM machinery creates in a /tmp: none of them may appear in the host's.
std::set<std::string> jvm_files_in_host_tmp()
{
  std::set<std::string> found;
  for (const auto& entry : fs::directory_iterator("/tmp")) {
    std::string name = entry.path().filename();
    if (name.starts_with("perf-") || name.starts_with("libflamebpf-agent") ||
        name.starts_with(".attach_pid") || name.starts_with(".java_pid"))
      found.insert(name);
  }
  return found;
}

struct JavaProfile {
  uint64_t java_samples = 0;      // samples of the process "java"
  uint64_t named_leaf = 0;        // of those, samples whose innermost frame is a named Java frame
  uint64_t chain = 0;             // of those, samples through Burner.run;a;b;c, in that order
  uint64_t unknown_jit = 0;       // of those, samples with an unnamed frame in JIT code
  std::string unknown_jit_stacks; // those samples' stacks, for a failure to show
  std::string log;                // flamebpf's output
  std::map<std::string, uint64_t> folded;
};

JavaProfile summarize(const std::string& path, std::string log)
{
  JavaProfile profile;
  profile.log = std::move(log);
  profile.folded = read_folded(path);
  for (const auto& [stack, count] : profile.folded) {
    if (!stack.starts_with("java;"))
      continue;
    profile.java_samples += count;
    std::string leaf = stack.substr(stack.rfind(';') + 1);
    if (leaf.ends_with("_[j]") || leaf.ends_with("_[i]"))
      profile.named_leaf += count;
    if (stack.find(kJavaChain) != std::string::npos)
      profile.chain += count;
    if (stack.find("Interpreter;[unknown]") != std::string::npos) {
      profile.unknown_jit += count;
      profile.unknown_jit_stacks += std::to_string(count) + " " + stack + "\n";
    }
  }
  return profile;
}

struct Measured {
  int exit_code = -1;
  JavaProfile profile;
};

// The seconds flamebpf's log says the attach took, or -1.
double attach_seconds(const std::string& log)
{
  std::smatch match;
  static const std::regex loaded("loaded flamebpf's agent from \\S+ in ([0-9.]+) s");
  return std::regex_search(log, match, loaded) ? std::stod(match[1]) : -1;
}

class JvmContainerTest : public ::testing::Test {
protected:
  void SetUp() override
  {
    ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
    host_tmp_before_ = jvm_files_in_host_tmp();
  }

  void TearDown() override
  {
    EXPECT_EQ(jvm_files_in_host_tmp(), host_tmp_before_)
        << "a JVM file appeared in the host's /tmp";
  }

  // Runs a Burner JVM in container name and waits until it is warm.
  DockerDaemon::Container run_jvm(const std::string& name,
                                  const std::vector<std::string>& options = {},
                                  const std::vector<std::string>& java_options = {},
                                  const std::vector<std::string>& burner_args = {"60"},
                                  JavaVersion version = JavaVersion::kJdk17,
                                  bool frame_pointers = true)
  {
    std::vector<std::string> command{std::string(kContainerJavaHome) + "/bin/java"};
    if (frame_pointers)
      command.push_back("-XX:+PreserveFramePointer");
    command.insert(command.end(), java_options.begin(), java_options.end());
    command.insert(command.end(), {"-cp", std::string(kContainerAppDir), "Burner"});
    command.insert(command.end(), burner_args.begin(), burner_args.end());
    auto container = docker_.run(name, options, docker_.java_image(version), command);
    docker_.wait_for_output(name, "burner ready");
    return container;
  }

  JavaProfile profile(const std::string& target, const std::vector<std::string>& extra = {})
  {
    std::string out = dir_.path().string() + "/java.folded";
    std::vector<std::string> args{"--cgroup", target, "-o", out};
    args.insert(args.end(), extra.begin(), extra.end());
    auto run = run_flamebpf(args);
    EXPECT_EQ(run.exit_code, 0) << run.output;
    return summarize(out, run.output);
  }

  // The Java chain is named, in caller-to-callee order, and carries most samples. min_samples
  // only rules out a profile that sampled (almost) nothing: on a busy machine the JVM gets less
  // than a whole CPU, and the shares below are what the test is about. unnamed_jit_percent is the
  // share of samples whose JIT frame may stay unnamed, beyond one: a sample taken at the instant
  // code is installed or freed may land where neither the perf map nor the code cache read at
  // the drain names anything (one of 395 samples in one CI run of Jdk25, none in 15 runs here).
  static void expect_named_java(const JavaProfile& profile,
                                uint64_t min_samples,
                                uint64_t unnamed_jit_percent = 0)
  {
    EXPECT_GT(profile.java_samples, min_samples) << profile.log;
    EXPECT_GE(profile.chain * 100, profile.java_samples * 80)
        << kJavaChain << " carries too few samples; " << hottest_stacks(profile.folded, 3)
        << profile.log;
    EXPECT_GE(profile.named_leaf * 100, profile.java_samples * 90) << profile.log;
    EXPECT_LE(profile.unknown_jit * 100, 100 + profile.java_samples * unnamed_jit_percent)
        << profile.unknown_jit << " samples with an unnamed JIT frame:\n"
        << profile.unknown_jit_stacks << profile.log;
    std::printf("[ FIGURES  ] %llu java samples, %.1f%% with a named Java leaf, %.1f%% through "
                "Burner.run;a;b;c; attach %.3f s\n",
                static_cast<unsigned long long>(profile.java_samples),
                100.0 * static_cast<double>(profile.named_leaf) /
                    static_cast<double>(std::max<uint64_t>(profile.java_samples, 1)),
                100.0 * static_cast<double>(profile.chain) /
                    static_cast<double>(std::max<uint64_t>(profile.java_samples, 1)),
                attach_seconds(profile.log));
  }

  DockerDaemon& docker_ = DockerDaemon::shared();
  ContainersRemovedAtEnd containers_removed_{docker_};
  TempDir dir_;
  std::set<std::string> host_tmp_before_;
};

TEST_F(JvmContainerTest, Jdk17JavaFramesNamedThroughAutomaticAttach)
{
  auto jvm = run_jvm("jvm-17");
  auto result = profile("jvm-17", {"-d", "10"});
  expect_named_java(result, 400);
  EXPECT_GE(attach_seconds(result.log), 0) << result.log;
  EXPECT_EQ(result.log.find("runs without -XX:+PreserveFramePointer"), std::string::npos)
      << result.log;
  // The map and the agent are inside the container, named after the JVM's own pid.
  EXPECT_TRUE(fs::exists("/proc/" + std::to_string(jvm.pid) + "/root/tmp/perf-1.map"));
}

TEST_F(JvmContainerTest, SecondRunFindsTheAgentLoadedAndDoesNotAttachAgain)
{
  run_jvm("jvm-twice");
  auto first = profile("jvm-twice", {"-d", "2"});
  ASSERT_GE(attach_seconds(first.log), 0) << first.log;
  auto second = profile("jvm-twice", {"-d", "3"});
  EXPECT_LT(attach_seconds(second.log), 0) << second.log;
  expect_named_java(second, 100);
}

// Nothing is written into the container, and nothing is asked of the JVM; its JIT frames are
// still named, read from outside it.
TEST_F(JvmContainerTest, NoAttachLeavesTheJvmAlone)
{
  auto jvm = run_jvm("jvm-noattach");
  auto result = profile("jvm-noattach", {"-d", "2", "--no-attach"});
  expect_named_java(result, 100);
  EXPECT_EQ(result.log.find("loaded flamebpf's agent"), std::string::npos) << result.log;
  std::string tmp = "/proc/" + std::to_string(jvm.pid) + "/root/tmp";
  for (const auto& entry : fs::directory_iterator(tmp)) {
    std::string name = entry.path().filename();
    EXPECT_FALSE(name.starts_with("perf-") || name.starts_with("libflamebpf-agent") ||
                 name.starts_with(".attach_pid") || name.starts_with(".java_pid"))
        << name;
  }
}

TEST_F(JvmContainerTest, MissingFramePointersGetOneWarningWithTheFlag)
{
  auto jvm = run_jvm("jvm-nofp", {}, {}, {"60"}, JavaVersion::kJdk17, false);
  // Frame pointers are all there is without the unwinder's tables (with them, the agent's
  // records take their place: containers_jvm_unwind_itest.cpp).
  auto result = profile("jvm-nofp", {"-d", "2", "--unwind-memory", "0"});
  std::string warning = "JVM " + std::to_string(jvm.pid) +
                        " (target jvm-nofp) runs without -XX:+PreserveFramePointer";
  auto first = result.log.find(warning);
  ASSERT_NE(first, std::string::npos) << result.log;
  EXPECT_EQ(result.log.find(warning, first + 1), std::string::npos) << result.log;
  EXPECT_NE(result.log.find("add -XX:+PreserveFramePointer"), std::string::npos) << result.log;
}

TEST_F(JvmContainerTest, NonRootJvm)
{
  auto jvm = run_jvm("jvm-user", {"--user", std::to_string(kContainerAppUid)});
  auto result = profile("jvm-user", {"-d", "4"});
  expect_named_java(result, 150);
  struct stat status {};
  std::string map = "/proc/" + std::to_string(jvm.pid) + "/root/tmp/perf-1.map";
  ASSERT_EQ(::stat(map.c_str(), &status), 0);
  EXPECT_EQ(status.st_uid, static_cast<uid_t>(kContainerAppUid));
}

// The capabilities the systemd unit grants flamebpf (AmbientCapabilities=), in setpriv's
// spelling: "-all,+bpf,+perfmon,…".
std::string service_capabilities()
{
  std::istringstream unit(read_text(FLAMEBPF_SERVICE_UNIT));
  std::string list = "-all";
  for (std::string line; std::getline(unit, line);) {
    if (!line.starts_with("AmbientCapabilities="))
      continue;
    std::istringstream names(line.substr(line.find('=') + 1));
    for (std::string name; names >> name;) {
      std::string lower = name.substr(4); // without "CAP_"
      for (char& c : lower)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      list += ",+" + lower;
    }
  }
  return list;
}

// flamebpf run with only the capabilities caps (setpriv's spelling), as root's uid otherwise.
Measured profile_with_capabilities(const std::string& target,
                                   const std::string& caps,
                                   const std::string& dir)
{
  std::string out = dir + "/caps.folded";
  std::string log = dir + "/caps.log";
  Child run({"/usr/bin/setpriv", "--inh-caps=" + caps, "--ambient-caps=" + caps,
             "--bounding-set=" + caps, FLAMEBPF_BINARY, "--cgroup", target, "-d", "4", "-o", out},
            "", log);
  return {run.wait(), summarize(out, read_text(log))};
}

TEST_F(JvmContainerTest, NonRootJvmWithTheServicesCapabilities)
{
  std::string caps = service_capabilities();
  ASSERT_NE(caps.find("+bpf"), std::string::npos) << caps;
  run_jvm("jvm-unit-caps", {"--user", std::to_string(kContainerAppUid)});
  auto run = profile_with_capabilities("jvm-unit-caps", caps, dir_.path());
  ASSERT_EQ(run.exit_code, 0) << run.profile.log;
  expect_named_java(run.profile, 150);
}

TEST_F(JvmContainerTest, RootJvmWithFourCapabilities)
{
  // A JVM running as root (Docker's default) needs nothing more to be attached to.
  run_jvm("jvm-root-four-caps");
  auto run = profile_with_capabilities("jvm-root-four-caps",
                                       "-all,+bpf,+perfmon,+sys_admin,+sys_ptrace", dir_.path());
  ASSERT_EQ(run.exit_code, 0) << run.profile.log;
  expect_named_java(run.profile, 150);
}

TEST_F(JvmContainerTest, NonRootJvmWithFourCapabilitiesNamesWhatIsMissing)
{
  // Enough to sample and name everything but the JIT's code of a JVM of another user.
  run_jvm("jvm-four-caps", {"--user", std::to_string(kContainerAppUid)});
  auto run = profile_with_capabilities("jvm-four-caps", "-all,+bpf,+perfmon,+sys_admin,+sys_ptrace",
                                       dir_.path());
  ASSERT_EQ(run.exit_code, 0) << run.profile.log;
  EXPECT_GT(run.profile.java_samples, 150u) << run.profile.log;
  std::istringstream log(run.profile.log);
  std::vector<std::string> about_agent;
  for (std::string line; std::getline(log, line);) {
    if (line.find("cannot load flamebpf's agent") != std::string::npos)
      about_agent.push_back(line);
  }
  ASSERT_EQ(about_agent.size(), 1u) << run.profile.log;
  EXPECT_NE(about_agent[0].find("flamebpf lacks CAP_"), std::string::npos) << about_agent[0];
  std::printf("[ FIGURES  ] %s\n", about_agent[0].c_str());
}

TEST_F(JvmContainerTest, JvmThatIsNotPid1)
{
  auto container = run_jvm("jvm-init", {"--init"});
  // The JVM is a child of docker-init, the container's PID 1.
  pid_t java = -1;
  std::istringstream procs(read_text(container.cgroup2_path + "/cgroup.procs"));
  for (pid_t pid; procs >> pid;) {
    if (read_text("/proc/" + std::to_string(pid) + "/comm") == "java\n")
      java = pid;
  }
  ASSERT_GT(java, 0);
  std::string status = read_text("/proc/" + std::to_string(java) + "/status");
  ASSERT_EQ(status.find("NSpid:\t" + std::to_string(java) + "\t1\n"), std::string::npos) << status;
  auto result = profile("jvm-init", {"-d", "4"});
  expect_named_java(result, 150);
}

TEST_F(JvmContainerTest, AgentLoadedAtStartNeedsNoAttach)
{
  std::string in_container = "/opt/flamebpf/libflamebpf-agent.so";
  run_jvm("jvm-agentpath", {"-v", std::string(FLAMEBPF_AGENT_LIBRARY) + ":" + in_container + ":ro"},
          {"-agentpath:" + in_container});
  auto result = profile("jvm-agentpath", {"-d", "4"});
  expect_named_java(result, 150);
  EXPECT_EQ(result.log.find("loaded flamebpf's agent"), std::string::npos) << result.log;
}

TEST_F(JvmContainerTest, Jdk25)
{
  if (!jdk25_available())
    GTEST_SKIP() << "JDK 25 is not installed at " << host_jdk_home(JavaVersion::kJdk25);
  run_jvm("jvm-25", {}, {}, {"60"}, JavaVersion::kJdk25);
  auto result = profile("jvm-25", {"-d", "4"});
  expect_named_java(result, 150);
}

TEST_F(JvmContainerTest, MethodRecompiledDuringTheRunStaysNamed)
{
  // c is deoptimized and recompiled 4 s after the start, inside the profile.
  run_jvm("jvm-recompile", {}, {}, {"8", "--recompile"});
  auto result = profile("jvm-recompile", {"-d", "4", "--interval", "1"});
  ASSERT_NE(docker_.docker({"logs", "jvm-recompile"}).find("burner recompile"), std::string::npos);
  expect_named_java(result, 150);
}

TEST_F(JvmContainerTest, JvmThatExitsBeforeTheDrainIsStillNamed)
{
  // Ready after 1.5 s, gone 2 s later; the only drain comes when flamebpf stops at 6 s. A sample
  // of the JVM's last instants may land in code whose perf-map line its agent never wrote (one
  // of 186 samples in one CI run, none in six runs here): 1 % beyond the one any test allows.
  run_jvm("jvm-brief", {}, {}, {"3.5"});
  auto result = profile("jvm-brief", {"-d", "6", "--interval", "30"});
  expect_named_java(result, 50, 1);
}

// A JVM that starts while flamebpf runs is sampled while it starts: before it loads libjvm.so (not
// yet a JVM to flamebpf) or before HotSpot handles SIGQUIT (which the attach begins with, and whose
// default action kills). flamebpf keeps looking and attaches once the JVM can take it. This JVM
// holds still early in its start (PauseAtStartup comes before HotSpot installs its signal
// handlers) until the test removes its pause file. A held JVM wakes for a moment ten times a
// second, too briefly to be sampled, and its start up to the pause takes about 5 ms of CPU, most of
// it in the loader, before libjvm.so is mapped: its options file (40,000 lines, which libjvm.so
// reads before the pause) adds about 40 ms after, so flamebpf is sure to meet it starting.
TEST_F(JvmContainerTest, JvmStartedDuringTheRunIsAttachedOnceItCanBe)
{
  std::string out = dir_.path().string() + "/all.folded";
  std::string log = dir_.path().string() + "/all.log";
  Child profiler(
      {FLAMEBPF_BINARY, "--all-containers", "--containers-only", "-F", "999", "-v", "-o", out}, "",
      log);
  ASSERT_TRUE(wait_for_text(log, "profiling", 30)) << read_text(log);
  // The container is a target before the JVM in it starts: a shell waits, then becomes the JVM.
  std::string options = "i=0; while [ $i -lt 40000 ]; do echo -XX:+PreserveFramePointer; "
                        "i=$((i+1)); done >/tmp/vm.options";
  std::string java = std::string(kContainerJavaHome) +
                     "/bin/java -XX:VMOptionsFile=/tmp/vm.options -XX:+PreserveFramePointer " +
                     "-XX:+UnlockDiagnosticVMOptions -XX:+PauseAtStartup " +
                     "-XX:PauseAtStartupFile=/tmp/vm.paused -cp " + std::string(kContainerAppDir) +
                     " Burner 60";
  std::vector<std::string> command{"/bin/sh", "-c", options + " && sleep 2 && exec " + java};
  auto jvm = docker_.run("jvm-late", {}, docker_.java_image(JavaVersion::kJdk17), command);
  std::string pause_file = "/proc/" + std::to_string(jvm.pid) + "/root/tmp/vm.paused";
  ASSERT_TRUE(wait_until([&] { return fs::exists(pause_file); }, std::chrono::seconds(10),
                         "the JVM to pause at its start"))
      << read_text(log);
  // flamebpf has found it starting and holds off before the JVM may go on.
  ASSERT_TRUE(wait_for_text(log, ") is still starting", 30)) << read_text(log);
  // Kept: several more of flamebpf's attempts, and drains, while the JVM is held.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  ASSERT_EQ(::unlink(pause_file.c_str()), 0);
  docker_.wait_for_output("jvm-late", "burner ready");
  // Kept: Burner's named frames accrue samples for 4 s.
  std::this_thread::sleep_for(std::chrono::seconds(4));
  profiler.signal(SIGTERM);
  ASSERT_EQ(profiler.wait(), 0) << read_text(log);

  auto result = summarize(dir_.path().string() + "/all.jvm-late.folded", read_text(log));
  std::string about = "JVM " + std::to_string(jvm.pid) + " (";
  EXPECT_NE(result.log.find(about), std::string::npos) << result.log;
  EXPECT_GE(attach_seconds(result.log), 0) << result.log;
  EXPECT_EQ(result.log.find("cannot load flamebpf's agent"), std::string::npos) << result.log;
  // The run holds the JVM's start too (class loading, the JIT compiling Burner): the chain
  // carries less of it than in the tests that profile a warm JVM.
  EXPECT_GT(result.chain, 1000u) << hottest_stacks(result.folded, 5) << result.log;
  EXPECT_GE(result.chain * 100, result.java_samples * 50)
      << hottest_stacks(result.folded, 5) << result.log;
  // The recording is written at its end: the JIT code sampled before the agent named it (the
  // JVM's first seconds) is named then.
  EXPECT_LE(result.unknown_jit * 100, result.java_samples)
      << result.unknown_jit << " samples with an unnamed JIT frame:\n"
      << result.unknown_jit_stacks;
  bool put_off = result.log.find("is still starting") != std::string::npos;
  std::printf("[ FIGURES  ] JVM started during the run: %llu java samples, %.1f%% through "
              "Burner.run;a;b;c, %llu with unnamed JIT frames; %s; attach %.3f s\n",
              static_cast<unsigned long long>(result.java_samples),
              100.0 * static_cast<double>(result.chain) /
                  static_cast<double>(std::max<uint64_t>(result.java_samples, 1)),
              static_cast<unsigned long long>(result.unknown_jit),
              put_off ? "found starting and put off" : "found a JVM only once it handled SIGQUIT",
              attach_seconds(result.log));
}

TEST_F(JvmContainerTest, SymlinkedPerfMapIsReplacedAndReadsNothingOfTheHost)
{
  // A host file that would name every JIT address if flamebpf followed the container's link.
  std::string secret = dir_.path().string() + "/host-secret.map";
  std::ofstream(secret) << "0 7fffffffffff HostSecret.leaked()\n";
  auto jvm = run_jvm("jvm-hostile");
  std::string planted = "/proc/" + std::to_string(jvm.pid) + "/root/tmp/perf-1.map";
  ASSERT_EQ(::symlink(secret.c_str(), planted.c_str()), 0)
      << planted << ": " << std::strerror(errno);

  auto result = profile("jvm-hostile", {"-d", "4"});
  EXPECT_EQ(count_containing(result.folded, "HostSecret"), 0u);
  EXPECT_EQ(read_text(secret), "0 7fffffffffff HostSecret.leaked()\n");
  // The agent put a map of its own in the link's place, never writing through it.
  EXPECT_FALSE(fs::is_symlink(planted));
  EXPECT_TRUE(fs::is_regular_file(planted));
  expect_named_java(result, 150);
}

} // namespace
} // namespace flamebpf::testing
