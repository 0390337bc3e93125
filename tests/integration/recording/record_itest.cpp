// flamebpf against the real kernel: real processes in real cgroup2 directories.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <sys/stat.h>
#include <sys/types.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "harness.h"

namespace flamebpf::testing {
namespace {

constexpr const char* kChain = kBurnerChain;

// Expects more than min_samples samples of process comm, at least 80% of them ending in the
// workload's call chain main;run;a;b;c (root to leaf, fully symbolized). Returns the samples.
uint64_t expect_workload_chain(const std::map<std::string, uint64_t>& folded,
                               const std::string& comm,
                               uint64_t min_samples,
                               const std::string& context)
{
  uint64_t samples = burner_chain_samples(folded, comm, context);
  EXPECT_GT(samples, min_samples) << hottest_stacks(folded) << context;
  return samples;
}

// A directory every user may write in, sticky as /tmp is, removed on destruction.
class SharedDir {
public:
  SharedDir()
  {
    char pattern[] = "/tmp/flamebpf-shared.XXXXXX";
    if (!::mkdtemp(pattern))
      throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
    ::chmod(path_.c_str(), 01777);
  }
  ~SharedDir()
  {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

private:
  std::string path_;
};

bool have_setpriv()
{
  return ::access("/usr/bin/setpriv", X_OK) == 0;
}

// Runs a shell script as the real unprivileged user nobody; its exit code.
int as_nobody(const std::string& script)
{
  Child shell({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
               "--inh-caps=-all", "/bin/sh", "-c", script});
  return shell.wait();
}

// Waits for child to exit, for at most seconds, then kills it: a run that blocks fails the test
// instead of hanging it. The exit code, and whether it had to be killed.
std::pair<int, bool> wait_at_most(Child& child, double seconds)
{
  bool exited = poll_until(
      [&] {
        std::string stat = read_text("/proc/" + std::to_string(child.pid()) + "/stat");
        auto close = stat.rfind(')');
        return close == std::string::npos || (close + 2 < stat.size() && stat[close + 2] == 'Z');
      },
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(seconds)));
  if (!exited)
    child.signal(SIGKILL);
  return {child.wait(), !exited};
}

// The sockets process pid has open.
size_t sockets_of(pid_t pid)
{
  size_t sockets = 0;
  std::error_code ignored;
  for (auto it =
           std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ignored);
       it != std::filesystem::directory_iterator(); it.increment(ignored))
    sockets += std::filesystem::read_symlink(it->path(), ignored).string().starts_with("socket:");
  return sockets;
}

struct stat status_of(const std::string& path)
{
  struct stat status {};
  EXPECT_EQ(::lstat(path.c_str(), &status), 0) << path;
  return status;
}

std::set<std::string> names_in(const std::string& dir)
{
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    names.insert(entry.path().filename());
  return names;
}

class RecordTest : public ::testing::Test {
protected:
  void SetUp() override { ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root"; }

  TempDir dir_;
};

TEST_F(RecordTest, CgroupTargetShowsCallChainAndExcludesOtherProcesses)
{
  TempCgroup target;
  auto inside = copy_burner(dir_.path(), "burner_in");
  auto outside = copy_burner(dir_.path(), "burner_out");
  Child workload({inside, "15"}, target.path());
  Child other({outside, "15"});
  wait_until_busy(workload.pid(), "burner_in");
  wait_until_busy(other.pid(), "burner_out");

  std::string out = dir_.path().string() + "/out.folded";
  auto run = run_flamebpf({"--cgroup", target.path(), "-F", "199", "-d", "2.5", "-o", out});
  ASSERT_EQ(run.exit_code, 0) << run.output;

  auto folded = read_folded(out);
  uint64_t total = total_count(folded);
  // One busy CPU at 199 Hz for 2.5 s is about 497 samples; the machine may be shared.
  uint64_t in_target = expect_workload_chain(folded, "burner_in", 150, run.output);
  EXPECT_GE(in_target * 100, total * 90) << "less than 90% of samples attributed to the workload";
  EXPECT_EQ(count_with_prefix(folded, "burner_out"), 0u)
      << "a process outside the target leaked in";
  EXPECT_NE(run.output.find("wrote " + out), std::string::npos) << run.output;
}

TEST_F(RecordTest, DescendantCgroupCountsForItsAncestorTarget)
{
  TempCgroup target;
  TempCgroup child(target.path());
  TempCgroup grandchild(child.path());
  auto inside = copy_burner(dir_.path(), "burner_deep");
  Child workload({inside, "15"}, grandchild.path());
  wait_until_busy(workload.pid(), "burner_deep");

  std::string out = dir_.path().string() + "/out.folded";
  // Relative to the cgroup2 mount, as users may write it.
  auto run = run_flamebpf({"--cgroup", target.relative_path(), "-d", "4", "-o", out});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto folded = read_folded(out);
  expect_workload_chain(folded, "burner_deep", 100, run.output);
}

TEST_F(RecordTest, OtherCgroupIsNotSampled)
{
  TempCgroup target;
  TempCgroup sibling;
  auto busy = copy_burner(dir_.path(), "burner_sib");
  Child workload({busy, "15"}, sibling.path());
  wait_until_busy(workload.pid(), "burner_sib");
  std::string out = dir_.path().string() + "/out.folded";
  auto run = run_flamebpf({"--cgroup", target.path(), "-d", "2", "-o", out});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(count_with_prefix(read_folded(out), "burner_sib"), 0u);
}

TEST_F(RecordTest, PidTargetKeepsOnlyThatProcess)
{
  auto wanted = copy_burner(dir_.path(), "burner_pid");
  auto unwanted = copy_burner(dir_.path(), "burner_nopid");
  Child a({wanted, "15"});
  Child b({unwanted, "15"});
  wait_until_busy(a.pid(), "burner_pid");
  wait_until_busy(b.pid(), "burner_nopid");
  std::string out = dir_.path().string() + "/out.folded";
  auto run = run_flamebpf({"--pid", std::to_string(a.pid()), "-d", "3", "-o", out});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto folded = read_folded(out);
  EXPECT_GT(count_with_prefix(folded, "burner_pid;"), 80u) << run.output;
  EXPECT_EQ(count_with_prefix(folded, "burner_nopid"), 0u);
  EXPECT_EQ(total_count(folded), count_with_prefix(folded, "burner_pid;"));
}

TEST_F(RecordTest, WholeHostWithoutFilters)
{
  auto busy = copy_burner(dir_.path(), "burner_host");
  Child workload({busy, "15"});
  wait_until_busy(workload.pid(), "burner_host");
  std::string out = dir_.path().string() + "/out.folded";
  auto run = run_flamebpf({"-d", "3", "-o", out});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto folded = read_folded(out);
  expect_workload_chain(folded, "burner_host", 80, run.output);
}

// Sampling starts with the program built without the unwinder, which the kernel verifies in a few
// milliseconds, and the program with it takes the samples once it is loaded (tens of
// milliseconds later): a busy process is sampled before then, and its stacks unwind through
// glibc's qsort (no frame pointers) from then on.
TEST_F(RecordTest, SamplingStartsBeforeTheUnwindingProgramIsLoadedAndItTakesOver)
{
  Child workload({SPLIT_SORTER_BINARY, "30"});
  wait_until_busy(workload.pid(), "split_sorter");
  std::string out = dir_.path().string() + "/out.folded";
  auto run =
      run_flamebpf({"-p", std::to_string(workload.pid()), "-F", "999", "-d", "2", "-v", "-o", out});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::smatch first;
  std::smatch handed;
  ASSERT_TRUE(std::regex_search(run.output, first,
                                std::regex(R"(first sample .* \(at ([0-9.]+) s monotonic\))")))
      << run.output;
  ASSERT_TRUE(std::regex_search(
      run.output, handed,
      std::regex(R"(the unwinding program takes the samples from ([0-9.]+) s monotonic)")))
      << run.output;
  EXPECT_LT(std::stod(first[1]), std::stod(handed[1])) << run.output;
  auto folded = read_folded(out);
  uint64_t samples = 0;
  uint64_t through_qsort = 0;
  for (const auto& [stack, count] : folded) {
    samples += count;
    if (stack.find(";main;run;") != std::string::npos &&
        stack.find(";qsort_r;msort_with_tmp") != std::string::npos)
      through_qsort += count;
  }
  EXPECT_GT(samples, 1000u);
  EXPECT_GE(through_qsort * 100, samples * 60) << run.output;
}

TEST_F(RecordTest, ShortLivedProcessIsSymbolizedAfterItExits)
{
  TempCgroup target;
  auto brief = copy_burner(dir_.path(), "burner_brief");
  std::string out = dir_.path().string() + "/out.folded";
  // The drain comes at 2 s; the workload lives 0.6 s and is gone by then.
  Child profiler(
      {FLAMEBPF_BINARY, "-v", "--cgroup", target.path(), "-d", "3", "--interval", "2", "-o", out},
      "", dir_.path().string() + "/log");
  ASSERT_TRUE(wait_for_text(dir_.path().string() + "/log", "sampling ", 30));
  Child workload({brief, "0.6"}, target.path());
  EXPECT_EQ(workload.wait(), 0);
  ASSERT_EQ(profiler.wait(), 0) << read_text(dir_.path().string() + "/log");

  auto folded = read_folded(out);
  // Named although the process had exited when the interval was symbolized.
  expect_workload_chain(folded, "burner_brief", 15, read_text(dir_.path().string() + "/log"));
  EXPECT_EQ(count_containing(folded, "burner_brief+0x"), 0u);
}

TEST_F(RecordTest, ProcessIsRecapturedAfterExec)
{
  TempCgroup target;
  auto after = copy_burner(dir_.path(), "burner_exec");
  std::string out = dir_.path().string() + "/out.folded";
  Child profiler({FLAMEBPF_BINARY, "-v", "--cgroup", target.path(), "-o", out}, "",
                 dir_.path().string() + "/log");
  ASSERT_TRUE(wait_for_text(dir_.path().string() + "/log", "sampling ", 30));
  // The shell is sampled (and captured) first; the same process then becomes the burner.
  Child workload({"/bin/sh", "-c",
                  "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; exec " + after + " 1.5"},
                 target.path());
  EXPECT_EQ(workload.wait(), 0);
  profiler.signal(SIGTERM);
  ASSERT_EQ(profiler.wait(), 0) << read_text(dir_.path().string() + "/log");

  auto folded = read_folded(out);
  expect_workload_chain(folded, "burner_exec", 50, read_text(out));
  for (const auto& [stack, count] : folded)
    EXPECT_FALSE(stack.starts_with("sh;") && stack.ends_with(kChain))
        << "samples after exec were named after the shell: " << stack;
}

TEST_F(RecordTest, BinaryOnlyInsideItsMountNamespaceResolves)
{
  TempCgroup target;
  // The program lives on a tmpfs mounted in a private mount namespace: the host has no such path,
  // as with a container's own files.
  std::string script = "mount -t tmpfs flamebpf-test /mnt && cp " + std::string(BURNER_BINARY) +
                       " /mnt/burner_mntns && exec /mnt/burner_mntns 15";
  Child workload(
      {"/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script},
      target.path());
  wait_until_busy(workload.pid(), "burner_mntns");
  std::string out = dir_.path().string() + "/out.folded";
  auto run = run_flamebpf({"--cgroup", target.path(), "-d", "2", "-o", out});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_FALSE(std::filesystem::exists("/mnt/burner_mntns"));
  auto folded = read_folded(out);
  expect_workload_chain(folded, "burner_mntns", 50, run.output);
}

TEST_F(RecordTest, DeletedBinaryStillResolves)
{
  TempCgroup target;
  auto doomed = copy_burner(dir_.path(), "burner_del");
  Child workload({doomed, "15"}, target.path());
  wait_until_busy(workload.pid(), "burner_del");
  std::filesystem::remove(doomed);
  std::string out = dir_.path().string() + "/out.folded";
  auto run = run_flamebpf({"--cgroup", target.path(), "-d", "2", "-o", out});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto folded = read_folded(out);
  expect_workload_chain(folded, "burner_del", 50, run.output);
}

// Spins until stop is set; its name is what the profile must show.
__attribute__((noinline)) void burn_in_thread_for_pid_test(const std::atomic<bool>& stop)
{
  volatile uint64_t sink = 0;
  while (!stop.load(std::memory_order_relaxed))
    sink = sink * 31 + 7;
}

TEST_F(RecordTest, ThreadIdStandsForItsProcess)
{
  std::atomic<bool> stop{false};
  std::atomic<pid_t> tid{0};
  std::thread burner([&] {
    tid = static_cast<pid_t>(::gettid());
    burn_in_thread_for_pid_test(stop);
  });
  while (tid.load() == 0)
    std::this_thread::yield();
  ASSERT_NE(tid.load(), ::getpid());
  std::string out = dir_.path().string() + "/out.folded";
  auto run = run_flamebpf({"--pid", std::to_string(tid.load()), "-d", "2", "-o", out});
  stop = true;
  burner.join();
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("is a thread of process " + std::to_string(::getpid())),
            std::string::npos)
      << run.output;
  EXPECT_GT(count_containing(read_folded(out), "burn_in_thread_for_pid_test"), 50u) << run.output;
}

TEST_F(RecordTest, UnknownPidIsAUsageError)
{
  auto run = run_flamebpf({"--pid", "999999999", "-d", "1", "-o", "/dev/null"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.output.find("no process with pid 999999999"), std::string::npos) << run.output;
}

TEST_F(RecordTest, ManyIntervalsCountLikeOneInterval)
{
  TempCgroup target;
  auto busy = copy_burner(dir_.path(), "burner_ivl");
  // Two profilers see the same workload from its start to its end: one drains every 0.2 s, the
  // other once at the end. A sample lost or counted twice at a buffer switch shows up as a
  // difference, and both must match the workload's CPU time.
  std::string many = dir_.path().string() + "/many.folded";
  std::string one = dir_.path().string() + "/one.folded";
  Child frequent(
      {FLAMEBPF_BINARY, "-v", "--cgroup", target.path(), "--interval", "0.2", "-o", many}, "",
      dir_.path().string() + "/many.log");
  Child single({FLAMEBPF_BINARY, "-v", "--cgroup", target.path(), "--interval", "1000", "-o", one},
               "", dir_.path().string() + "/one.log");
  ASSERT_TRUE(wait_for_text(dir_.path().string() + "/many.log", "sampling ", 30));
  ASSERT_TRUE(wait_for_text(dir_.path().string() + "/one.log", "sampling ", 30));

  Child workload({busy, "4"}, target.path());
  // Every sample is in the BPF maps once the workload has exited: the program runs in the
  // sampling interrupt.
  double cpu_used = cpu_seconds_at_exit(workload);
  frequent.signal(SIGTERM);
  single.signal(SIGTERM);
  ASSERT_EQ(frequent.wait(), 0) << read_text(dir_.path().string() + "/many.log");
  ASSERT_EQ(single.wait(), 0) << read_text(dir_.path().string() + "/one.log");

  double many_total = static_cast<double>(count_with_prefix(read_folded(many), "burner_ivl;"));
  double one_total = static_cast<double>(count_with_prefix(read_folded(one), "burner_ivl;"));
  ASSERT_GT(cpu_used, 1.0);
  // Every CPU second of the workload is 99 samples, whoever drains how often.
  EXPECT_NEAR(one_total / (99.0 * cpu_used), 1.0, 0.1)
      << one_total << " samples, " << cpu_used << " CPU seconds";
  EXPECT_NEAR(many_total / (99.0 * cpu_used), 1.0, 0.1)
      << many_total << " samples, " << cpu_used << " CPU seconds";
  EXPECT_NEAR(many_total / one_total, 1.0, 0.05) << many_total << " vs " << one_total;
}

TEST_F(RecordTest, SigtermStopsEarlyAndStillWrites)
{
  TempCgroup target;
  auto busy = copy_burner(dir_.path(), "burner_term");
  Child workload({busy, "15"}, target.path());
  std::string out = dir_.path().string() + "/out.folded";
  std::string log = dir_.path().string() + "/log";
  Child profiler({FLAMEBPF_BINARY, "-v", "--cgroup", target.path(), "-o", out}, "", log);
  ASSERT_TRUE(wait_for_text(log, "sampling ", 30)) << read_text(log);
  // Kept: samples accrue for 2 s, what SIGTERM must not lose.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  profiler.signal(SIGTERM);
  ASSERT_EQ(profiler.wait(), 0) << read_text(log);
  EXPECT_GT(count_with_prefix(read_folded(out), "burner_term;"), 50u);
}

TEST_F(RecordTest, DefaultOutputPathIsPrinted)
{
  TempDir cwd;
  std::string previous = std::filesystem::current_path();
  std::filesystem::current_path(cwd.path());
  auto run = run_flamebpf({"-d", "1"});
  std::filesystem::current_path(previous);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto position = run.output.find("wrote ./flamebpf-");
  ASSERT_NE(position, std::string::npos) << run.output;
  std::string name = run.output.substr(position + 8, run.output.find(':', position) - position - 8);
  EXPECT_TRUE(std::filesystem::exists(cwd.path().string() + "/" + name)) << name;
  EXPECT_NE(name.find(".folded"), std::string::npos);
}

TEST_F(RecordTest, DevNullStaysADevice)
{
  auto run = run_flamebpf({"-d", "0.5", "-o", "/dev/null"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  struct stat status {};
  ASSERT_EQ(::stat("/dev/null", &status), 0);
  EXPECT_TRUE(S_ISCHR(status.st_mode)) << "writing the output replaced /dev/null";
}

TEST_F(RecordTest, UnknownCgroupIsAUsageError)
{
  auto run = run_flamebpf({"--cgroup", "no-such-cgroup-here", "-d", "1", "-o", "/dev/null"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.output.find("unknown cgroup or container no-such-cgroup-here"), std::string::npos)
      << run.output;
  EXPECT_EQ(std::count(run.output.begin(), run.output.end(), '\n'), 1) << run.output;
}

TEST_F(RecordTest, BadFrequencyIsAUsageError)
{
  auto run = run_flamebpf({"-F", "0", "-d", "1"});
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("--frequency"), std::string::npos) << run.output;
}

TEST_F(RecordTest, FrequencyAboveTheKernelsLimitIsAUsageError)
{
  auto limit = std::stoul(read_text("/proc/sys/kernel/perf_event_max_sample_rate"));
  if (limit >= 100000)
    GTEST_SKIP() << "the kernel allows any frequency flamebpf accepts";
  auto run = run_flamebpf({"-F", std::to_string(limit + 1), "-d", "1", "-o", "/dev/null"});
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("perf_event_max_sample_rate"), std::string::npos) << run.output;
}

// sysfs as flamebpf sees it in a mount namespace where the online list is replaced: CPUs listed
// online that are not possible are left out, and CPUs missing from the list are not sampled.
TEST_F(RecordTest, OnlineCpuListThatDisagreesWithTheKernel)
{
  auto burner = copy_burner(dir_.path(), "burner_cpus");
  Child workload({burner, "15"});
  wait_until_busy(workload.pid(), "burner_cpus");
  auto possible = read_text("/sys/devices/system/cpu/possible");
  for (const std::string& online : {std::string("0-511\n"), std::string("0\n")}) {
    std::string fake = dir_.path().string() + "/online";
    std::ofstream(fake) << online;
    std::string out = dir_.path().string() + "/cpus.folded";
    std::string log = dir_.path().string() + "/cpus.log";
    Child run({"/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
               "mount --bind \"$0\" /sys/devices/system/cpu/online && exec \"$@\"", fake,
               FLAMEBPF_BINARY, "--pid", std::to_string(workload.pid()), "-d", "2", "-o", out},
              "", log);
    ASSERT_EQ(run.wait(), 0) << online << read_text(log);
    // The burner runs on whatever CPU the scheduler gives it; with CPU 0 alone sampled, it is
    // seen only while it is there.
    uint64_t samples = total_count(read_folded(out));
    if (online == "0-511\n") {
      EXPECT_GT(samples, 60u) << "possible CPUs " << possible << read_text(log);
    }
    EXPECT_EQ(read_text(log).find("error"), std::string::npos) << read_text(log);
  }
}

TEST_F(RecordTest, TargetCgroupRemovedWhileInTheFilter)
{
  auto target = std::make_unique<TempCgroup>();
  Child workload({copy_burner(dir_.path(), "burner_gone"), "30"}, target->path());
  wait_until_busy(workload.pid(), "burner_gone");
  std::string out = dir_.path().string() + "/gone.folded";
  std::string log = dir_.path().string() + "/gone.log";
  Child run({FLAMEBPF_BINARY, "--cgroup", target->path(), "-d", "3", "-o", out}, "", log);
  // Kept: samples accrue for 1.5 s (start-up included) before the target goes.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  // The workload dies and its cgroup goes while flamebpf's filter still holds it.
  workload.signal(SIGKILL);
  workload.wait();
  target.reset();
  ASSERT_EQ(run.wait(), 0) << read_text(log);
  // The samples from before are kept, and the loss of the target is said once.
  uint64_t samples = burner_chain_samples(read_folded(out), "burner_gone", read_text(log));
  EXPECT_GT(samples, 40u) << read_text(log);
  std::string text = read_text(log);
  size_t said = 0;
  for (size_t at = text.find("gone"); at != std::string::npos; at = text.find("gone", at + 1))
    ++said;
  EXPECT_GE(said, 1u) << text;
  EXPECT_EQ(text.find("error"), std::string::npos) << text;
}

// A container that starts while flamebpf runs is sampled before flamebpf adds it to the kernel's
// filter; those first samples count for the container all the same, never for the host, wherever
// between two drains the start falls.
TEST_F(RecordTest, ContainerStartedWhileProfilingNeverCountsForTheHost)
{
  TempCgroup parent;
  std::string docker = parent.path() + "/docker";
  ASSERT_EQ(::mkdir(docker.c_str(), 0755), 0);
  std::string out = dir_.path().string() + "/all.folded";
  std::string log = dir_.path().string() + "/all.log";
  // Drains every 50 ms and many samples: each container starts well inside some drain period.
  Child profiler(
      {FLAMEBPF_BINARY, "--all-containers", "--interval", "0.05", "-F", "999", "-o", out}, "", log);
  ASSERT_TRUE(wait_for_text(log, "profiling", 30)) << read_text(log);
  // "profiling" is said once the targets are resolved; the BPF program loads after that.
  wait_until_sampling(profiler.pid());
  auto burner = copy_burner(dir_.path(), "burner_new");
  std::vector<std::string> containers;
  for (int i = 1; i <= 6; ++i) {
    std::string id = std::to_string(i) + std::string(63, 'c');
    containers.push_back(docker + "/" + id);
    ASSERT_EQ(::mkdir(containers.back().c_str(), 0755), 0);
    // Fixed work (about 0.4 s of CPU), not 0.4 s of the clock: on a loaded machine a burner
    // timed by the clock can get a few milliseconds of CPU, and so a few samples.
    Child workload({burner, "--rounds", "2000"}, containers.back());
    workload.wait();
  }
  profiler.signal(SIGTERM);
  int exit_code = profiler.wait();
  for (const auto& container : containers)
    ::rmdir(container.c_str());
  ::rmdir(docker.c_str());
  std::string context = read_text(log);
  ASSERT_EQ(exit_code, 0) << context;

  auto host = read_folded(dir_.path().string() + "/all.host.folded");
  std::map<std::string, uint64_t> burners_in_host;
  for (const auto& [stack, count] : host)
    if (stack.starts_with("burner_new;"))
      burners_in_host.emplace(stack, count);
  EXPECT_EQ(count_with_prefix(host, "burner_new;"), 0u)
      << hottest_stacks(burners_in_host) << hottest_stacks(host) << context;
  // Each container's file (named by its short ID; other containers on the host have theirs) holds
  // its 0.4 s of CPU at 999 Hz, with room for sampling's own losses.
  for (const auto& container : containers) {
    std::string short_id = container.substr(container.rfind('/') + 1, 12);
    auto own = read_folded(dir_.path().string() + "/all." + short_id + ".folded");
    EXPECT_GT(count_with_prefix(own, "burner_new;"), 150u) << short_id << "\n"
                                                           << hottest_stacks(own) << context;
  }
}

TEST_F(RecordTest, JvmExitingDuringTheAttachCostsNothing)
{
  // A process that looks like a JVM (libjvm.so mapped, frame pointers claimed) and listens on its
  // attach socket without ever answering; it dies while flamebpf waits for the reply.
  std::string spinner_log = dir_.path().string() + "/spinner.log";
  // Its libjvm.so is made in the scratch directory.
  Child jvm({"/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", dir_.path(), JIT_SPINNER_BINARY, "--jvm",
             "-XX:+PreserveFramePointer", "--socket", "silent", "none"},
            "", spinner_log);
  struct RemoveAttachFiles {
    pid_t pid;
    ~RemoveAttachFiles()
    {
      ::unlink(("/tmp/.java_pid" + std::to_string(pid)).c_str());
      ::unlink(("/tmp/.attach_pid" + std::to_string(pid)).c_str());
    }
  } remove_attach_files{jvm.pid()};
  ASSERT_TRUE(wait_for_text(spinner_log, "spinner ready", 10)) << read_text(spinner_log);
  std::string out = dir_.path().string() + "/jvm.folded";
  std::string log = dir_.path().string() + "/jvm.log";
  auto started = std::chrono::steady_clock::now();
  Child run({FLAMEBPF_BINARY, "--pid", std::to_string(jvm.pid()), "-d", "3", "-o", out, "-v"}, "",
            log);
  // The fake JVM has accepted flamebpf's connection next to its listening socket.
  ASSERT_TRUE(wait_until([&] { return sockets_of(jvm.pid()) >= 2; }, std::chrono::seconds(10),
                         "flamebpf to connect to the fake JVM"))
      << read_text(log);
  // Kept: the spinner's samples accrue while the attach waits.
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  pid_t jvm_pid = jvm.pid();
  jvm.signal(SIGKILL);
  jvm.wait();
  ASSERT_EQ(run.wait(), 0) << read_text(log);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_LT(seconds, 3 + 2.5) << read_text(log);
  EXPECT_GT(total_count(read_folded(out)), 20u) << read_text(log);
  std::string text = read_text(log);
  // With -v, libbpf's debug lines come too: only flamebpf's own error and warning lines count.
  EXPECT_EQ(text.find("flamebpf: error"), std::string::npos) << text;
  EXPECT_EQ(text.find("flamebpf: warning"), std::string::npos) << text;
  // The attach that was under way ends in one debug line: a JVM that exits is no failure.
  std::string about = "JVM " + std::to_string(jvm_pid) + " ";
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);)
    if (line.find(about) != std::string::npos)
      lines.push_back(line);
  ASSERT_EQ(lines.size(), 1u) << text;
  EXPECT_NE(lines[0].find("debug: "), std::string::npos) << text;
  EXPECT_NE(lines[0].find("exited"), std::string::npos) << text;
}

TEST_F(RecordTest, UnprivilegedUserGetsOneLineWithTheFix)
{
  if (::access("/usr/bin/setpriv", X_OK) != 0)
    GTEST_SKIP() << "setpriv (util-linux) is not installed";
  TempDir dir;
  std::string log = dir.path().string() + "/log";
  Child child({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
               "--inh-caps=-all", FLAMEBPF_BINARY, "-d", "1", "-o", "/dev/null"},
              "", log);
  EXPECT_EQ(child.wait(), 1);
  std::string output = read_text(log);
  EXPECT_NE(output.find("missing CAP_BPF and CAP_PERFMON"), std::string::npos) << output;
  EXPECT_NE(output.find("sudo"), std::string::npos) << output;
  EXPECT_EQ(std::count(output.begin(), output.end(), '\n'), 1) << output;
  EXPECT_EQ(output.find("libbpf"), std::string::npos) << output;
}

TEST_F(RecordTest, LinksPlantedInASharedDirectoryNeverRedirectTheProfile)
{
  if (!have_setpriv())
    GTEST_SKIP() << "setpriv (util-linux) is not installed";
  // root's file outside the shared directory, which nobody must not be able to have overwritten.
  std::string victim = dir_.path().string() + "/victim";
  std::ofstream(victim) << "precious\n";
  ::chmod(victim.c_str(), 0644);
  SharedDir shared;
  std::string out = shared.path() + "/x.folded";
  TempCgroup target;
  Child workload({copy_burner(dir_.path(), "burner_shared"), "15"}, target.path());
  wait_until_busy(workload.pid(), "burner_shared");
  std::string log = dir_.path().string() + "/log";
  Child profiler({FLAMEBPF_BINARY, "--cgroup", target.path(), "-d", "2", "-o", out}, "", log);
  // Before flamebpf writes, nobody plants links to the victim at every name it could use: the
  // output, its neighbours, and the temporary names earlier versions used (<output>.tmp.<pid>)
  // for flamebpf's pid and the next ones.
  std::string pid = std::to_string(profiler.pid());
  ASSERT_EQ(as_nobody("cd " + shared.path() + " && for p in $(seq " + pid + " $((" + pid +
                      " + 50))); do ln -s " + victim + " x.folded.tmp.$p; done && ln -s " + victim +
                      " x.folded && ln -s " + victim + " x.svg && ln -s " + victim +
                      " x.folded.tmp && ln -s " + victim + " .x.folded.tmp.0000000000000000"),
            0);
  auto planted = names_in(shared.path());
  auto [exit_code, killed] = wait_at_most(profiler, 2 + 60);
  ASSERT_FALSE(killed) << read_text(log);
  ASSERT_EQ(exit_code, 0) << read_text(log);

  EXPECT_EQ(read_text(victim), "precious\n");
  auto victim_status = status_of(victim);
  EXPECT_EQ(victim_status.st_uid, 0u);
  EXPECT_EQ(victim_status.st_mode & 07777, 0644u);
  // The profile took the output's name; every other link is as planted, and nothing else is there.
  auto status = status_of(out);
  EXPECT_TRUE(S_ISREG(status.st_mode));
  EXPECT_EQ(status.st_mode & 07777, 0600u);
  expect_workload_chain(read_folded(out), "burner_shared", 60, read_text(log));
  EXPECT_EQ(names_in(shared.path()), planted);
  for (const auto& name : planted) {
    if (name != "x.folded") {
      EXPECT_TRUE(S_ISLNK(status_of(shared.path() + "/" + name).st_mode)) << name;
    }
  }
}

TEST_F(RecordTest, AFifoAtTheOutputPathIsSaidAtOnceAndNeverBlocks)
{
  if (!have_setpriv())
    GTEST_SKIP() << "setpriv (util-linux) is not installed";
  SharedDir shared;
  std::string out = shared.path() + "/x.folded";
  ASSERT_EQ(as_nobody("mkfifo " + out), 0);
  std::string log = dir_.path().string() + "/log";
  Child profiler({FLAMEBPF_BINARY, "-d", "2", "-o", out}, "", log);
  auto [exit_code, killed] = wait_at_most(profiler, 2 + 30);
  ASSERT_FALSE(killed) << "flamebpf blocked on the FIFO\n" << read_text(log);
  EXPECT_EQ(exit_code, 2) << read_text(log);
  std::string output = read_text(log);
  EXPECT_EQ(std::count(output.begin(), output.end(), '\n'), 1) << output;
  EXPECT_NE(output.find(out + ": it is a FIFO"), std::string::npos) << output;
  EXPECT_TRUE(S_ISFIFO(status_of(out).st_mode));

  // Also when the FIFO appears during the recording: said once flamebpf comes to write.
  std::string late = shared.path() + "/late.folded";
  Child recording({FLAMEBPF_BINARY, "-v", "-d", "2", "-o", late}, "", log);
  ASSERT_TRUE(wait_for_text(log, "sampling ", 30)) << read_text(log);
  ASSERT_EQ(as_nobody("mkfifo " + late), 0);
  auto [late_exit, late_killed] = wait_at_most(recording, 2 + 30);
  ASSERT_FALSE(late_killed) << "flamebpf blocked on the FIFO\n" << read_text(log);
  EXPECT_EQ(late_exit, 1) << read_text(log);
  EXPECT_NE(read_text(log).find(late + ": it is a FIFO"), std::string::npos) << read_text(log);
}

TEST_F(RecordTest, ProfilesAreTheirOwnersOnlyAndGoToTheSudoUser)
{
  if (!have_setpriv())
    GTEST_SKIP() << "setpriv (util-linux) is not installed";
  SharedDir shared;
  std::string svg = shared.path() + "/mine.svg";
  auto sudo = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv{"/usr/bin/env", "SUDO_UID=65534", "SUDO_GID=65534",
                                  FLAMEBPF_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    std::string log = dir_.path().string() + "/sudo.log";
    Child run(argv, "", log);
    EXPECT_EQ(run.wait(), 0) << read_text(log);
  };
  sudo({"-d", "1", "-o", svg});
  auto status = status_of(svg);
  EXPECT_EQ(status.st_uid, 65534u);
  EXPECT_EQ(status.st_gid, 65534u);
  EXPECT_EQ(status.st_mode & 07777, 0600u);
  // The user who ran sudo can open it.
  EXPECT_EQ(as_nobody("head -c 5 " + svg + " >/dev/null"), 0);

  // A file already at the output path is replaced by a new one; the old one is never given away.
  std::string folded = shared.path() + "/old.folded";
  std::ofstream(folded) << "old 1\n";
  ::chmod(folded.c_str(), 0644);
  std::string kept = dir_.path().string() + "/kept";
  ASSERT_EQ(::link(folded.c_str(), kept.c_str()), 0);
  sudo({"-d", "1", "-o", folded});
  EXPECT_EQ(status_of(folded).st_uid, 65534u);
  EXPECT_EQ(status_of(kept).st_uid, 0u);
  EXPECT_EQ(status_of(kept).st_mode & 07777, 0644u);
  EXPECT_EQ(read_text(kept), "old 1\n");

  // Without sudo: root's, and root's only; the default outputs too.
  TempDir cwd;
  std::string previous = std::filesystem::current_path();
  std::filesystem::current_path(cwd.path());
  auto run = run_flamebpf({"-d", "1"});
  std::filesystem::current_path(previous);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto written = names_in(cwd.path());
  ASSERT_EQ(written.size(), 2u) << run.output; // the folded file and its flame graph
  for (const auto& name : written) {
    auto own = status_of(cwd.path().string() + "/" + name);
    EXPECT_EQ(own.st_uid, 0u) << name;
    EXPECT_EQ(own.st_mode & 07777, 0600u) << name;
  }
}

TEST_F(RecordTest, TargetsWhoseNamesMeetAfterSanitizingGetAFileEach)
{
  // "<parent>/a" would be written as "<parent>_a", the name of the cgroup "<parent>_a".
  CgroupsMeetingAsFileNames cgroups;
  const std::string& nested = cgroups.nested();
  const std::string& sibling = cgroups.sibling();
  {
    Child in_nested({copy_burner(dir_.path(), "burner_nested"), "15"}, nested);
    Child in_sibling({copy_burner(dir_.path(), "burner_sibling"), "15"}, sibling);
    wait_until_busy(in_nested.pid(), "burner_nested");
    wait_until_busy(in_sibling.pid(), "burner_sibling");
    auto run = run_flamebpf({"--cgroup", nested, "--cgroup", sibling, "-d", "3", "-o",
                             dir_.path().string() + "/out.folded"});
    ASSERT_EQ(run.exit_code, 0) << run.output;
    std::set<std::string> files;
    for (const auto& name : names_in(dir_.path())) {
      if (name.starts_with("out."))
        files.insert(name);
    }
    ASSERT_EQ(files.size(), 2u) << ::testing::PrintToString(files) << run.output;
    std::string mount = cgroup2_mount();
    std::string sibling_file = "out." + sibling.substr(mount.size() + 1) + ".folded";
    ASSERT_TRUE(files.contains(sibling_file)) << ::testing::PrintToString(files);
    files.erase(sibling_file);
    auto own = read_folded(dir_.path().string() + "/" + sibling_file);
    auto other = read_folded(dir_.path().string() + "/" + *files.begin());
    EXPECT_GT(count_with_prefix(own, "burner_sibling;"), 50u) << run.output;
    EXPECT_EQ(count_with_prefix(own, "burner_nested;"), 0u);
    EXPECT_GT(count_with_prefix(other, "burner_nested;"), 50u) << run.output;
    EXPECT_EQ(count_with_prefix(other, "burner_sibling;"), 0u);
  }
}

} // namespace
} // namespace flamebpf::testing
