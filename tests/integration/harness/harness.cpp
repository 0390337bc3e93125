#include "harness.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "common/procfs.h"
#include "common/unique_fd.h"
#include "process.h"

namespace flamebpf::testing {
namespace {

std::atomic<int> g_cgroup_counter{0};

// Kills every process of a cgroup tree and removes its directories, deepest first.
void remove_cgroup_tree(const std::string& path)
{
  std::error_code ignored;
  for (const auto& entry : std::filesystem::directory_iterator(path, ignored)) {
    if (entry.is_directory())
      remove_cgroup_tree(entry.path());
  }
  // A cgroup stays busy for a moment after its last process died.
  bool removed = poll_until(
      [&] {
        std::istringstream in(read_text(path + "/cgroup.procs"));
        bool any = false;
        for (pid_t pid = 0; in >> pid; any = true)
          ::kill(pid, SIGKILL);
        return !any && ::rmdir(path.c_str()) == 0;
      },
      std::chrono::seconds(2));
  if (!removed)
    ::rmdir(path.c_str());
}

// A run killed mid-test (a ctest timeout, a machine lost) leaves its cgroups behind, which tests
// that count the host's containers would count: each test program removes those of ended runs
// (TempCgroup's name holds its creator's pid) before its first test.
class CgroupsOfEndedRunsRemoved : public ::testing::Environment {
public:
  void SetUp() override
  {
    auto mount = procfs::cgroup2_mount();
    if (!mount || ::geteuid() != 0)
      return;
    static const std::regex name(R"(flamebpf-test-([0-9]+)-[0-9]+)");
    std::error_code ignored;
    for (const auto& entry : std::filesystem::directory_iterator(*mount, ignored)) {
      std::smatch match;
      std::string file_name = entry.path().filename().string();
      if (!entry.is_directory(ignored) || !std::regex_match(file_name, match, name))
        continue;
      pid_t owner = static_cast<pid_t>(std::stol(match[1]));
      if (::kill(owner, 0) == 0 || errno != ESRCH)
        continue;
      std::fprintf(stderr, "[ HARNESS  ] removing %s, left by an ended run (pid %d)\n",
                   entry.path().c_str(), owner);
      remove_cgroup_tree(entry.path());
    }
  }
};

[[maybe_unused]] const auto* const g_cgroups_of_ended_runs_removed =
    ::testing::AddGlobalTestEnvironment(new CgroupsOfEndedRunsRemoved);

#ifdef FLAMEBPF_SECCOMP_REPORT
// flamebpf runs under its seccomp profile (tests/CMakeLists.txt), which kills it at a call the
// profile lacks and appends the call to FLAMEBPF_SECCOMP_REPORT. A test that stops flamebpf with
// SIGKILL itself, or never looks at its log, would not fail for that: the test program does, as
// its tests end, naming each call.
class CallsOutsideTheSeccompProfileFail : public ::testing::Environment {
public:
  void SetUp() override { reported_before_ = read_text(FLAMEBPF_SECCOMP_REPORT).size(); }
  void TearDown() override
  {
    std::string reported = read_text(FLAMEBPF_SECCOMP_REPORT);
    if (reported.size() > reported_before_)
      ADD_FAILURE() << "flamebpf made system calls that " FLAMEBPF_SECCOMP_PROFILE
                       " does not allow (scripts/seccomp-profile adds them):\n"
                    << reported.substr(reported_before_);
  }

private:
  size_t reported_before_ = 0;
};

[[maybe_unused]] const auto* const g_calls_outside_the_seccomp_profile_fail =
    ::testing::AddGlobalTestEnvironment(new CallsOutsideTheSeccompProfileFail);
#endif

} // namespace

std::string cgroup2_mount()
{
  auto mount = procfs::cgroup2_mount();
  if (!mount)
    throw std::runtime_error(mount.error().message);
  return *mount;
}

TempCgroup::TempCgroup(const std::string& parent)
{
  std::string base = parent.empty() ? cgroup2_mount() : parent;
  path_ = base + "/flamebpf-test-" + std::to_string(::getpid()) + "-" +
          std::to_string(g_cgroup_counter++);
  if (::mkdir(path_.c_str(), 0755) != 0)
    throw std::runtime_error("cannot create cgroup " + path_ + ": " + std::strerror(errno));
}

TempCgroup::~TempCgroup()
{
  remove_cgroup_tree(path_);
}

CgroupsMeetingAsFileNames::CgroupsMeetingAsFileNames()
    : nested_(parent_.path() + "/a"), sibling_(parent_.path() + "_a")
{
  for (const auto& path : {nested_, sibling_}) {
    if (::mkdir(path.c_str(), 0755) != 0)
      throw std::runtime_error("cannot create cgroup " + path + ": " + std::strerror(errno));
  }
}

CgroupsMeetingAsFileNames::~CgroupsMeetingAsFileNames()
{
  remove_cgroup_tree(sibling_);
  remove_cgroup_tree(nested_);
}

std::string TempCgroup::relative_path() const
{
  return path_.substr(cgroup2_mount().size() + 1);
}

Child::Child(const std::vector<std::string>& argv,
             const std::string& cgroup,
             const std::string& output_file)
{
  SpawnOptions options;
  options.cgroup = cgroup;
  UniqueFd output;
  if (!output_file.empty()) {
    output.reset(::open(output_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!output.valid())
      throw std::runtime_error("cannot open " + output_file + ": " + std::strerror(errno));
  }
  options.output = output.get();
  options.error_output = output.get();
  pid_ = spawn(argv, options);
}

Child::~Child()
{
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

int Child::wait()
{
  int status = 0;
  if (pid_ <= 0 || ::waitpid(pid_, &status, 0) != pid_)
    return -1;
  pid_ = -1;
  return exit_code(status);
}

void Child::signal(int signal_number)
{
  if (pid_ > 0)
    ::kill(pid_, signal_number);
}

std::string copy_burner(const std::string& dir, const std::string& name)
{
  std::string target = dir + "/" + name;
  std::filesystem::copy_file(BURNER_BINARY, target,
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::permissions(target, std::filesystem::perms::owner_all);
  return target;
}

RunResult run_flamebpf(const std::vector<std::string>& args)
{
  TempDir dir;
  std::string log = dir.path().string() + "/output";
  std::vector<std::string> argv{FLAMEBPF_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  Child child(argv, "", log);
  RunResult result;
  result.exit_code = child.wait();
  result.output = read_text(log);
  return result;
}

std::map<std::string, uint64_t> read_folded(const std::string& path)
{
  std::map<std::string, uint64_t> folded;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    auto space = line.rfind(' ');
    if (space == std::string::npos)
      continue;
    folded[line.substr(0, space)] += std::stoull(line.substr(space + 1));
  }
  return folded;
}

std::map<std::string, uint64_t> read_dumps_after(const std::string& target, size_t skipped)
{
  std::vector<std::filesystem::path> dumps;
  std::error_code failed;
  for (const auto& dump : std::filesystem::directory_iterator(target, failed))
    if (dump.path().extension() == ".folded")
      dumps.push_back(dump.path());
  std::sort(dumps.begin(), dumps.end()); // named by their windows' times
  std::map<std::string, uint64_t> stacks;
  for (size_t window = skipped; window < dumps.size(); ++window)
    for (const auto& [stack, count] : read_folded(dumps[window]))
      stacks[stack] += count;
  return stacks;
}

uint64_t count_with_prefix(const std::map<std::string, uint64_t>& folded, const std::string& prefix)
{
  uint64_t sum = 0;
  for (const auto& [stack, count] : folded)
    sum += stack.rfind(prefix, 0) == 0 ? count : 0;
  return sum;
}

uint64_t count_containing(const std::map<std::string, uint64_t>& folded, const std::string& text)
{
  uint64_t sum = 0;
  for (const auto& [stack, count] : folded)
    sum += stack.find(text) != std::string::npos ? count : 0;
  return sum;
}

uint64_t total_count(const std::map<std::string, uint64_t>& folded)
{
  uint64_t sum = 0;
  for (const auto& [stack, count] : folded)
    sum += count;
  return sum;
}

std::string hottest_stacks(const std::map<std::string, uint64_t>& folded, size_t how_many)
{
  std::vector<std::pair<uint64_t, std::string>> stacks;
  for (const auto& [stack, count] : folded)
    stacks.emplace_back(count, stack);
  std::sort(stacks.rbegin(), stacks.rend());
  std::string text = "hottest stacks:\n";
  for (size_t i = 0; i < std::min(stacks.size(), how_many); ++i)
    text += std::to_string(stacks[i].first) + " " + stacks[i].second.substr(0, 300) + "\n";
  return text;
}

uint64_t burner_chain_samples(const std::map<std::string, uint64_t>& folded,
                              const std::string& comm,
                              const std::string& context)
{
  uint64_t samples = 0;
  uint64_t with_chain = 0;
  for (const auto& [stack, count] : folded) {
    if (!stack.starts_with(comm + ";"))
      continue;
    samples += count;
    with_chain += stack.ends_with(kBurnerChain) ? count : 0;
  }
  EXPECT_GE(with_chain * 100, samples * 80)
      << "the call chain " << kBurnerChain << " of " << comm << " is missing or unnamed\n"
      << hottest_stacks(folded) << context;
  return samples;
}

double cpu_seconds(pid_t pid)
{
  std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  // Fields after the parenthesized comm: state is field 3, utime 14, stime 15.
  std::istringstream in(stat.substr(stat.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int index = 3; index <= 15 && in >> field; ++index) {
    if (index >= 14)
      ticks += std::stod(field);
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

double cpu_seconds_at_exit(Child& child)
{
  // A zombie keeps its times in /proc until waited for.
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(child.pid()), &info, WEXITED | WNOWAIT) != 0)
    return -1;
  double seconds = cpu_seconds(child.pid());
  child.wait();
  return seconds;
}

void wait_until_started(pid_t pid, const std::string& comm)
{
  // The kernel keeps the first 15 bytes of a program's name.
  std::string expected = comm.substr(0, 15) + "\n";
  std::string comm_file = "/proc/" + std::to_string(pid) + "/comm";
  wait_until([&] { return read_text(comm_file) == expected; }, std::chrono::seconds(10),
             "process " + std::to_string(pid) + " to start " + comm);
}

void wait_until_busy(pid_t pid, const std::string& comm)
{
  // The kernel keeps the first 15 bytes of a program's name.
  std::string expected = comm.substr(0, 15) + "\n";
  std::string proc = "/proc/" + std::to_string(pid);
  double at_start = -1;
  wait_until(
      [&] {
        // Neither file is there once the process is gone.
        if (read_text(proc + "/comm") != expected || read_text(proc + "/stat").empty())
          return false;
        double used = cpu_seconds(pid);
        if (at_start < 0)
          at_start = used;
        return used > at_start;
      },
      std::chrono::seconds(10), "process " + std::to_string(pid) + " (" + comm + ") to run");
}

void wait_until_sampling(pid_t pid)
{
  std::string fds = "/proc/" + std::to_string(pid) + "/fd";
  wait_until(
      [&] {
        std::error_code ignored;
        for (auto it = std::filesystem::directory_iterator(fds, ignored);
             it != std::filesystem::directory_iterator(); it.increment(ignored)) {
          if (std::filesystem::read_symlink(it->path(), ignored) == "anon_inode:[perf_event]")
            return true;
        }
        return false;
      },
      std::chrono::seconds(30), "flamebpf " + std::to_string(pid) + " to open its perf events");
}

bool wait_for_text(const std::string& path, const std::string& text, double timeout_seconds)
{
  return poll_until([&] { return read_text(path).find(text) != std::string::npos; },
                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                        std::chrono::duration<double>(timeout_seconds)));
}

std::string read_text(const std::string& path)
{
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::vector<std::string> lines_with(const std::string& text, const std::string& needle)
{
  std::vector<std::string> found;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find(needle) != std::string::npos)
      found.push_back(line);
  }
  return found;
}

LateThreadRoots late_thread_roots(const std::map<std::string, uint64_t>& folded)
{
  LateThreadRoots roots;
  for (const auto& [stack, count] : folded) {
    if (stack.find(";late_thread;") == std::string::npos)
      continue;
    roots.thread += count;
    // As perf report names the thread's root: clone3, then start_thread, then the function.
    if (stack.find(";start_thread;late_thread;") != std::string::npos)
      roots.start_thread += count;
  }
  return roots;
}

} // namespace flamebpf::testing
