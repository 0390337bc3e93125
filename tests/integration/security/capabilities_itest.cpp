// flamebpf's capability sets once it has started, as docs/security.md's Capabilities section gives
// them: every thread holds its role's set and nothing more, the bounding set holds what the run may
// ever need, and no thread keeps an inheritable or ambient capability. The sets expected are
// computed here, from the set flamebpf was started with and docs/security.md's table, not from
// flamebpf's code.
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <vector>

#include "dumps/dump_files.h"
#include "harness.h"
#include "http_client.h"
#include "notify_socket.h"

namespace flamebpf::testing {
namespace {

using namespace std::chrono_literals;
using Mask = uint64_t;

// Numbers from linux/capability.h.
constexpr int kChown = 0;
constexpr int kDacOverride = 1;
constexpr int kDacReadSearch = 2;
constexpr int kKill = 5;
constexpr int kSetgid = 6;
constexpr int kSetuid = 7;
constexpr int kSetpcap = 8;
constexpr int kNetAdmin = 12;
constexpr int kSysModule = 16;
constexpr int kSysPtrace = 19;
constexpr int kSysAdmin = 21;
constexpr int kSysResource = 24;
constexpr int kSyslog = 34;
constexpr int kPerfmon = 38;
constexpr int kBpf = 39;
constexpr int kCheckpointRestore = 40;

constexpr Mask cap(int number)
{
  return Mask{1} << number;
}

// docs/security.md's table. Reading any process's files (the pipeline's threads and the attacher):
constexpr Mask kReadProcesses = cap(kSysPtrace) | cap(kDacReadSearch) | cap(kDacOverride);
// Sampling after start (the pipeline's): CAP_SYS_ADMIN stands in for any of these not given.
constexpr Mask kSampling = cap(kBpf) | cap(kPerfmon) | cap(kCheckpointRestore);
// Loading the agent into JVMs (the attacher's, unless --no-attach).
constexpr Mask kAttaching = cap(kKill) | cap(kSetuid) | cap(kSetgid) | cap(kChown);
// Needed only while flamebpf starts (namespaces, /proc/kallsyms, RLIMIT_MEMLOCK).
constexpr Mask kStartOnly = cap(kSysAdmin) | cap(kSyslog) | cap(kSysResource);

// What each thread of a run should hold after start, from what the run was started with.
struct Expected {
  Mask pipeline = 0;
  Mask attacher = 0;
  Mask bounding = 0;
};

Expected expected_sets(Mask started_with, Mask bounding_at_start, bool attach)
{
  Expected expected;
  Mask pipeline = kReadProcesses | kSampling;
  if ((started_with & kSampling) != kSampling)
    pipeline |= cap(kSysAdmin);
  Mask attacher = kReadProcesses | (attach ? kAttaching : 0);
  expected.pipeline = pipeline & started_with;
  expected.attacher = attacher & started_with;
  // The bounding set can be narrowed only with CAP_SETPCAP.
  expected.bounding = (started_with & cap(kSetpcap)) != 0
                          ? (pipeline | attacher | kStartOnly) & started_with
                          : bounding_at_start;
  return expected;
}

// "{19 21 39}": the numbers in mask, for failure messages.
std::string numbers(Mask mask)
{
  std::string text;
  for (int number = 0; number < 64; ++number)
    if ((mask & cap(number)) != 0)
      text += (text.empty() ? "" : " ") + std::to_string(number);
  return "{" + text + "}";
}

// The value of a Cap* line of a /proc status file; nullopt if missing.
std::optional<Mask> status_mask(const std::string& status, const std::string& name)
{
  std::smatch match;
  if (!std::regex_search(status, match, std::regex(name + ":\\s*([0-9a-f]+)")))
    return std::nullopt;
  return std::stoull(match[1], nullptr, 16);
}

Mask own_mask(const std::string& name)
{
  auto mask = status_mask(read_text("/proc/self/status"), name);
  return mask ? *mask : 0;
}

struct ThreadSets {
  std::string tid;
  std::string comm;
  Mask inheritable = 0;
  Mask permitted = 0;
  Mask effective = 0;
  Mask bounding = 0;
  Mask ambient = 0;
};

// Every thread of process pid with its sets; threads that end while being read are left out.
std::vector<ThreadSets> thread_sets(pid_t pid)
{
  std::vector<ThreadSets> threads;
  std::error_code ignored;
  std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  for (auto it = std::filesystem::directory_iterator(tasks, ignored);
       it != std::filesystem::directory_iterator(); it.increment(ignored)) {
    std::string status = read_text(it->path().string() + "/status");
    std::string comm = read_text(it->path().string() + "/comm");
    auto inheritable = status_mask(status, "CapInh");
    auto permitted = status_mask(status, "CapPrm");
    auto effective = status_mask(status, "CapEff");
    auto bounding = status_mask(status, "CapBnd");
    auto ambient = status_mask(status, "CapAmb");
    if (!inheritable || !permitted || !effective || !bounding || !ambient || comm.empty())
      continue;
    comm.pop_back(); // its newline
    threads.push_back({it->path().filename().string(), comm, *inheritable, *permitted, *effective,
                       *bounding, *ambient});
  }
  return threads;
}

class CapsAfterStart : public ::testing::Test {
protected:
  void SetUp() override
  {
    ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
    out_ = dir_.path().string() + "/dumps";
    log_ = dir_.path().string() + "/agent.log";
  }

  // Runs flamebpf's agent, started through launcher (empty: directly) with extra options, on a
  // busy cgroup, with --listen on loopback; once it has started, sampled and answered a request,
  // returns its threads' sets. The run's samples of the workload go to samples.
  std::vector<ThreadSets> threads_of_a_run(const std::vector<std::string>& launcher,
                                           const std::vector<std::string>& extra,
                                           uint64_t& samples)
  {
    TempCgroup web;
    Child burner({copy_burner(dir_.path(), "burner_caps"), "60"}, web.path());
    wait_until_busy(burner.pid(), "burner_caps");
    NotifySocket systemd(dir_.path().string() + "/notify");
    std::vector<std::string> argv = launcher;
    for (const std::string& arg :
         {std::string(FLAMEBPF_BINARY), std::string("--cgroup"), web.path(),
          std::string("--output-dir"), out_, std::string("--interval"), std::string("1"),
          std::string("--listen"), std::string("127.0.0.1:0")})
      argv.push_back(arg);
    argv.insert(argv.end(), extra.begin(), extra.end());
    ::setenv("NOTIFY_SOCKET", systemd.path().c_str(), 1);
    Child agent(argv, "", log_);
    ::unsetenv("NOTIFY_SOCKET");

    std::vector<ThreadSets> threads;
    auto stop = [&] {
      agent.signal(SIGTERM);
      EXPECT_EQ(agent.wait(), 0) << read_text(log_);
    };
    if (!systemd.wait_for("READY=1", 30s)) {
      ADD_FAILURE() << "flamebpf did not say it was ready: " << read_text(log_);
      stop();
      return threads;
    }
    // Sampled: three dumps of the workload's target (the first one may hold a part of a second).
    std::string target = out_ + "/" + dumps::target_directory(web.relative_path());
    std::vector<dumps::Dump> dumps;
    wait_until(
        [&] {
          dumps = dumps::list_dumps(target);
          return dumps.size() >= 3;
        },
        30s, "three dumps of the workload");
    samples = 0;
    for (const auto& dump : dumps)
      for (const auto& file : dump.files)
        if (file.ends_with(".folded"))
          samples += burner_chain_samples(read_folded(target + "/" + file), "burner_caps",
                                          read_text(log_));
    // Its server answers (from threads that never held a capability).
    std::smatch match;
    std::string log = read_text(log_);
    if (std::regex_search(log, match, std::regex("http://127\\.0\\.0\\.1:([0-9]+)/"))) {
      EXPECT_EQ(http_status(http_get(static_cast<uint16_t>(std::stoi(match[1])), "/metrics")), 200);
    } else {
      ADD_FAILURE() << "no --listen port in the log: " << log;
    }
    threads = thread_sets(agent.pid());
    stop();
    return threads;
  }

  // Checks each thread's sets against expected, by role: the attacher by name, the threads
  // that talk to clients by name (the server's and libmicrohttpd's), and the rest the pipeline's
  // (its own thread and the readers of targets' files it starts).
  static void check(const std::vector<ThreadSets>& threads, const Expected& expected)
  {
    size_t attachers = 0;
    size_t serving = 0;
    size_t pipeline = 0;
    for (const auto& thread : threads) {
      Mask wanted = expected.pipeline;
      if (thread.comm == "flamebpf-attach") {
        wanted = expected.attacher;
        ++attachers;
      } else if (thread.comm == "flamebpf-http" || thread.comm.starts_with("MHD-")) {
        wanted = 0;
        ++serving;
      } else {
        ++pipeline;
      }
      std::string which = "thread " + thread.tid + " (" + thread.comm + ")";
      EXPECT_EQ(numbers(thread.permitted), numbers(wanted)) << which << ": permitted";
      EXPECT_EQ(numbers(thread.effective), numbers(wanted)) << which << ": effective";
      EXPECT_EQ(thread.inheritable, 0u) << which << ": inheritable " << numbers(thread.inheritable);
      EXPECT_EQ(thread.ambient, 0u) << which << ": ambient " << numbers(thread.ambient);
      EXPECT_EQ(numbers(thread.bounding), numbers(expected.bounding)) << which << ": bounding";
    }
    EXPECT_EQ(attachers, 1u);
    // Two handlers, the watcher of connections and the one making heavy answers.
    EXPECT_GE(serving, 4u);
    EXPECT_GE(pipeline, 1u);
  }

  TempDir dir_;
  std::string out_;
  std::string log_;
};

// As root on this kernel: the pipeline keeps CAP_BPF, CAP_PERFMON and CAP_CHECKPOINT_RESTORE,
// so CAP_SYS_ADMIN goes with the start, as CAP_SYSLOG does; what no role needs (CAP_NET_ADMIN,
// CAP_SYS_MODULE, ...) is gone from the bounding set too.
TEST_F(CapsAfterStart, AsRootEachThreadHoldsItsRolesSetAndTheBoundingSetTheirUnion)
{
  // Root's exec: what flamebpf starts with is this process's bounding set.
  Mask started_with = own_mask("CapBnd");
  uint64_t samples = 0;
  auto threads = threads_of_a_run({}, {}, samples);
  ASSERT_FALSE(threads.empty());
  check(threads, expected_sets(started_with, started_with, true));
  for (const auto& thread : threads) {
    for (int dropped : {kSyslog, kNetAdmin, kSysModule})
      EXPECT_EQ(thread.permitted & cap(dropped), 0u) << thread.comm << " holds " << dropped;
    if ((started_with & kSampling) == kSampling) {
      EXPECT_EQ(thread.permitted & cap(kSysAdmin), 0u) << thread.comm << " holds CAP_SYS_ADMIN";
    }
    if ((started_with & cap(kSetpcap)) != 0) {
      EXPECT_EQ(thread.bounding & (cap(kNetAdmin) | cap(kSysModule)), 0u) << thread.comm;
    }
  }
  EXPECT_GT(samples, 20u) << read_text(log_);
}

// With --no-attach, the attacher only reads JVMs, and nothing may signal, chown or act as
// another user.
TEST_F(CapsAfterStart, WithoutAttachingNoThreadMaySignalOrActAsAnotherUser)
{
  Mask started_with = own_mask("CapBnd");
  uint64_t samples = 0;
  auto threads = threads_of_a_run({}, {"--no-attach"}, samples);
  ASSERT_FALSE(threads.empty());
  check(threads, expected_sets(started_with, started_with, false));
  for (const auto& thread : threads)
    EXPECT_EQ((thread.permitted | thread.bounding) & kAttaching, 0u) << thread.comm;
  EXPECT_GT(samples, 20u) << read_text(log_);
}

// The DaemonSet's capabilities (SYS_ADMIN standing in for BPF and PERFMON, no SETPCAP), given as
// a container runtime gives them, ambient too: flamebpf samples, and its pipeline keeps
// CAP_SYS_ADMIN, which its BPF maps, perf events and /proc/<pid>/map_files need after start.
TEST_F(CapsAfterStart, WithTheDaemonSetsCapabilitiesItSamplesAndThePipelineKeepsSysAdmin)
{
  if (::access("/usr/bin/setpriv", X_OK) != 0)
    GTEST_SKIP() << "setpriv (util-linux) is not installed";
  std::string names = "-all,+sys_admin,+sys_ptrace,+kill,+setuid,+setgid,+chown,+dac_read_search,"
                      "+dac_override";
  Mask daemon_set = cap(kSysAdmin) | cap(kSysPtrace) | cap(kKill) | cap(kSetuid) | cap(kSetgid) |
                    cap(kChown) | cap(kDacReadSearch) | cap(kDacOverride);
  uint64_t samples = 0;
  auto threads = threads_of_a_run({"/usr/bin/setpriv", "--inh-caps=" + names,
                                   "--ambient-caps=" + names, "--bounding-set=" + names},
                                  {}, samples);
  ASSERT_FALSE(threads.empty());
  Expected expected = expected_sets(daemon_set, daemon_set, true);
  EXPECT_NE(expected.pipeline & cap(kSysAdmin), 0u);
  check(threads, expected);
  EXPECT_GT(samples, 20u) << read_text(log_);
}

} // namespace
} // namespace flamebpf::testing
