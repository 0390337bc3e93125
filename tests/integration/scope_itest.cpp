// Kernel-side scoping: with a few explicit targets, flamebpf's perf events sample the targets
// alone (per CPU in cgroup mode, per thread for a process), so the BPF program never even runs for
// anything else; beyond the event threshold, or for every container, it samples every CPU and its
// in-kernel filter turns the rest away. The -v log reports both per interval.
#include <cmath>
#include <filesystem>
#include <gtest/gtest.h>
#include <memory>
#include <regex>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "harness.h"

namespace flamebpf::testing {
namespace {

using namespace std::chrono_literals;

// Sum of the "N turned away by the in-kernel filter" counts of every interval in a -v log, and
// how many intervals reported one.
struct TurnedAway {
  uint64_t samples = 0;
  size_t intervals = 0;
};

TurnedAway turned_away(const std::string& log)
{
  static const std::regex line(R"((\d+) turned away by the in-kernel filter)");
  TurnedAway total;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator();
       ++it) {
    total.samples += std::stoull((*it)[1]);
    ++total.intervals;
  }
  return total;
}

bool samples_only_the_targets(const std::string& log)
{
  return log.find("sampling only the targets") != std::string::npos;
}

class ScopeTest : public ::testing::Test {
protected:
  void SetUp() override { ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root"; }
  TempDir dir_;
};

TEST_F(ScopeTest, CgroupTargetIsSampledByEventsOfItsOwn)
{
  TempCgroup target;
  TempCgroup child(target.path());
  auto inside = copy_burner(dir_.path(), "burner_scoped");
  auto outside = copy_burner(dir_.path(), "burner_busy");
  Child workload({inside, "15"}, child.path());
  Child other({outside, "15"});
  wait_until_busy(workload.pid(), "burner_scoped");
  wait_until_busy(other.pid(), "burner_busy");

  std::string out = dir_.path().string() + "/out.folded";
  std::string log = dir_.path().string() + "/flamebpf.log";
  Child profiler({FLAMEBPF_BINARY, "--cgroup", target.path(), "-d", "3", "-v", "-o", out}, "", log);
  wait_until_sampling(profiler.pid());
  double cpu_before = cpu_seconds(workload.pid());
  int exit_code = profiler.wait();
  double cpu_used = cpu_seconds(workload.pid()) - cpu_before;
  std::string output = read_text(log);
  ASSERT_EQ(exit_code, 0) << output;
  EXPECT_TRUE(samples_only_the_targets(output)) << output;
  // The busy process outside kept a CPU running all along, yet the program never ran for it:
  // not one sample turned away. Descendant cgroups are the kernel's business and still count.
  auto away = turned_away(output);
  EXPECT_GE(away.intervals, 1u) << output;
  EXPECT_EQ(away.samples, 0u) << output;
  auto folded = read_folded(out);
  // Every CPU second the workload had while it was sampled is 99 samples, once and only once,
  // however much of a CPU a busy machine left it. Its CPU time is taken from the events' opening
  // to flamebpf's exit: what it had while flamebpf wrote the profile is not sampled.
  ASSERT_GT(cpu_used, 0.5);
  double samples = static_cast<double>(burner_chain_samples(folded, "burner_scoped", output));
  EXPECT_GE(samples, 0.75 * 99 * cpu_used) << cpu_used << " CPU seconds\n"
                                           << hottest_stacks(folded);
  EXPECT_LE(samples, 1.1 * 99 * cpu_used) << cpu_used << " CPU seconds";
  EXPECT_EQ(count_with_prefix(folded, "burner_busy"), 0u);
}

// The control for the test above: the same counter is far from zero where every CPU is sampled.
TEST_F(ScopeTest, EveryContainerModeFiltersInTheKernel)
{
  auto outside = copy_burner(dir_.path(), "burner_host");
  Child other({outside, "15"});
  wait_until_busy(other.pid(), "burner_host");
  std::string out = dir_.path().string() + "/out.folded";
  auto run = run_flamebpf({"--all-containers", "--containers-only", "-d", "3", "-v", "-o", out});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_FALSE(samples_only_the_targets(run.output)) << run.output;
  // At 99 Hz the busy process alone is sampled about 300 times in 3 s.
  EXPECT_GT(turned_away(run.output).samples, 150u) << run.output;
  // With no container on the host, nothing is written, and flamebpf says so.
  if (run.output.find("profiling 0 containers") != std::string::npos) {
    EXPECT_NE(run.output.find("no target had samples"), std::string::npos) << run.output;
  }
}

TEST_F(ScopeTest, ThreadStartedAfterAttachingIsSampled)
{
  auto burner = copy_burner(dir_.path(), "burner_late");
  // The busy thread starts a second after the process, long after flamebpf opened its events on
  // the threads there were; it inherits them.
  Child workload({burner, "--late-thread", "1", "6"});
  // Started, but not busy: its busy thread comes after flamebpf's start.
  wait_until_started(workload.pid(), "burner_late");
  std::string out = dir_.path().string() + "/out.folded";
  auto run = run_flamebpf({"--pid", std::to_string(workload.pid()), "-d", "4", "-v", "-o", out});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_TRUE(samples_only_the_targets(run.output)) << run.output;
  auto folded = read_folded(out);
  uint64_t late = 0;
  for (const auto& [stack, count] : folded)
    if (stack.find("late_thread;run;a;b;c") != std::string::npos)
      late += count;
  EXPECT_GT(late, 150u) << hottest_stacks(folded);
  EXPECT_EQ(turned_away(run.output).samples, 0u) << run.output;
}

TEST_F(ScopeTest, TooManyEventsFallBackToTheInKernelFilter)
{
  // Enough targets that one event per target and CPU would pass kMaxScopedEvents (256).
  long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  size_t wanted = static_cast<size_t>(std::ceil(256.0 / static_cast<double>(cpus))) + 1;
  std::vector<std::unique_ptr<TempCgroup>> targets;
  std::vector<std::string> args;
  for (size_t i = 0; i < wanted; ++i) {
    targets.push_back(std::make_unique<TempCgroup>());
    args.insert(args.end(), {"--cgroup", targets.back()->path()});
  }
  auto burner = copy_burner(dir_.path(), "burner_many");
  Child workload({burner, "15"}, targets.back()->path());
  wait_until_busy(workload.pid(), "burner_many");
  std::string out = dir_.path().string() + "/out.folded";
  args.insert(args.end(), {"-d", "3", "-v", "-o", out});
  auto run = run_flamebpf(args);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_FALSE(samples_only_the_targets(run.output)) << run.output;
  EXPECT_NE(run.output.find("sampling " + std::to_string(cpus) + " CPUs"), std::string::npos)
      << run.output;
  // One file per target with samples: out.<target>.folded.
  uint64_t sampled = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path()))
    if (entry.path().extension() == ".folded")
      sampled += count_with_prefix(read_folded(entry.path().string()), "burner_many;");
  EXPECT_GT(sampled, 150u) << run.output;
}

// The in-kernel filter looks at most FB_MAX_CGROUP_LEVEL (15) levels down: a deeper target the
// user named is refused in one line; the same container found by --all-containers is left out
// with a warning while the rest is profiled.
TEST_F(ScopeTest, TargetNestedTooDeepIsNamedInOneLine)
{
  std::vector<std::unique_ptr<TempCgroup>> chain;
  chain.push_back(std::make_unique<TempCgroup>());
  std::string docker = chain.back()->path() + "/docker";
  ASSERT_EQ(::mkdir(docker.c_str(), 0755), 0);
  chain.push_back(std::make_unique<TempCgroup>(docker));
  while (chain.size() < 16)
    chain.push_back(std::make_unique<TempCgroup>(chain.back()->path()));
  // A container ID as the last step, so that --all-containers finds it.
  std::string deep = chain.back()->path() + "/" + std::string(64, 'a');
  ASSERT_EQ(::mkdir(deep.c_str(), 0755), 0);
  auto burner = copy_burner(dir_.path(), "burner_deep");
  {
    Child workload({burner, "15"}, deep);
    wait_until_busy(workload.pid(), "burner_deep");
    std::string out = dir_.path().string() + "/out.folded";
    auto named = run_flamebpf({"--cgroup", deep, "-d", "1", "-o", out});
    EXPECT_NE(named.exit_code, 0) << named.output;
    EXPECT_NE(named.output.find("is nested deeper than 15 levels"), std::string::npos)
        << named.output;

    auto all = run_flamebpf({"--all-containers", "-d", "2", "-o", out});
    EXPECT_EQ(all.exit_code, 0) << all.output;
    EXPECT_NE(all.output.find("it is not profiled"), std::string::npos) << all.output;
  }
  ::rmdir(deep.c_str());
  // Innermost first: removing the outermost first would leave the others nothing to remove.
  while (!chain.empty())
    chain.pop_back();
}

} // namespace
} // namespace flamebpf::testing
