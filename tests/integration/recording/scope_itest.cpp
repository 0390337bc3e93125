// Kernel-side scoping: with a few explicit targets, flamebpf's perf events sample the targets
// alone (per CPU in cgroup mode, per thread for a process), so the BPF program never even runs for
// anything else; beyond the event threshold, or for every container, it samples every CPU and its
// in-kernel filter turns the rest away. The -v log reports both per interval.
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <gtest/gtest.h>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
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

// When a -v log says sampling began (the first sample) and ended (the last drain), in
// CLOCK_MONOTONIC seconds.
struct SampledSpan {
  double first_sample = 0;
  double last_drain = 0;
};

std::optional<SampledSpan> sampled_span(const std::string& log)
{
  static const std::regex first(
      R"(first sample [0-9.]+ s after start \(at ([0-9.]+) s monotonic\))");
  static const std::regex drain(R"(drained at ([0-9.]+) s monotonic)");
  std::smatch match;
  if (!std::regex_search(log, match, first))
    return std::nullopt;
  SampledSpan span{.first_sample = std::stod(match[1])};
  bool drained = false;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), drain); it != std::sregex_iterator();
       ++it, drained = true)
    span.last_drain = std::stod((*it)[1]);
  if (!drained)
    return std::nullopt;
  return span;
}

// A process's CPU time (all its threads', from schedstat) read every 10 ms against
// CLOCK_MONOTONIC, so that what it had between two instants a log names can be taken afterwards.
class CpuTimeline {
public:
  explicit CpuTimeline(pid_t pid) : reader_([this, pid] { read_until_stopped(pid); }) {}
  ~CpuTimeline() { stop(); }
  CpuTimeline(const CpuTimeline&) = delete;
  CpuTimeline& operator=(const CpuTimeline&) = delete;

  void stop()
  {
    stopping_ = true;
    if (reader_.joinable())
      reader_.join();
  }

  // CPU seconds between two CLOCK_MONOTONIC instants, each interpolated between the readings
  // around it; NaN for an instant outside the readings. Only after stop().
  double seconds_between(double from, double to) const { return cpu_at(to) - cpu_at(from); }

private:
  struct Reading {
    double monotonic = 0;
    double cpu = 0;
  };

  static double cpu_seconds_of_threads(pid_t pid)
  {
    std::error_code ignored;
    uint64_t nanoseconds = 0;
    for (auto it =
             std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ignored);
         it != std::filesystem::directory_iterator(); it.increment(ignored)) {
      std::istringstream in(read_text(it->path().string() + "/schedstat"));
      uint64_t on_cpu = 0;
      if (in >> on_cpu)
        nanoseconds += on_cpu;
    }
    return static_cast<double>(nanoseconds) / 1e9;
  }

  void read_until_stopped(pid_t pid)
  {
    // One reading more after stop(): the last drain, which the profiler's exit follows by less
    // than the 10 ms between readings, falls before it.
    for (bool last = false; !last;) {
      last = stopping_;
      double cpu = cpu_seconds_of_threads(pid);
      double now =
          std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
              .count();
      readings_.push_back({now, cpu});
      if (!last)
        std::this_thread::sleep_for(10ms);
    }
  }

  double cpu_at(double monotonic) const
  {
    for (size_t i = 1; i < readings_.size(); ++i) {
      const auto& before = readings_[i - 1];
      const auto& after = readings_[i];
      if (before.monotonic <= monotonic && monotonic <= after.monotonic) {
        double part = (monotonic - before.monotonic) / (after.monotonic - before.monotonic);
        return before.cpu + part * (after.cpu - before.cpu);
      }
    }
    return std::nan("");
  }

  std::vector<Reading> readings_;
  std::atomic<bool> stopping_ = false;
  std::thread reader_;
};

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
  CpuTimeline workload_cpu(workload.pid());
  Child profiler({FLAMEBPF_BINARY, "--cgroup", target.path(), "-d", "3", "-v", "-o", out}, "", log);
  int exit_code = profiler.wait();
  workload_cpu.stop();
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
  // however much of a CPU a busy machine left it. It was sampled from its first sample to the
  // last drain: neither flamebpf's start nor its writing of the profile counts.
  auto sampled = sampled_span(output);
  ASSERT_TRUE(sampled) << output;
  double cpu_used = workload_cpu.seconds_between(sampled->first_sample, sampled->last_drain);
  ASSERT_GT(cpu_used, 0.5) << sampled->first_sample << " to " << sampled->last_drain;
  double samples = static_cast<double>(burner_chain_samples(folded, "burner_scoped", output));
  std::printf("[ FIGURES  ] %.0f samples in %.2f CPU seconds: %.1f per CPU second (99 Hz)\n",
              samples, cpu_used, samples / cpu_used);
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
