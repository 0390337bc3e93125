// The hostile-container tests' tools, shared by their files (containers_hostile_*_itest.cpp):
// flamebpf run with its time and peak memory measured, checks of its outputs, host files and
// sockets that must never be touched, and the fixture that runs jit_spinner in containers.
#pragma once

#include <algorithm>
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
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "container_harness.h"
#include "harness.h"
#include "pprof_tool.h"
#include "process.h"
#include "runtimes/hotspot/agent_installer.h"
#include "runtimes/hotspot/agent_library.h"

#ifndef JIT_SPINNER_BINARY
#error "define JIT_SPINNER_BINARY as the path of the jit_spinner program (tests/CMakeLists.txt)"
#endif
#ifndef RUN_METER_BINARY
#error "define RUN_METER_BINARY as the path of the run_meter program (tests/CMakeLists.txt)"
#endif

namespace flamebpf::testing {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// In every host file a container may point at; it must never show up in any output.
inline constexpr const char* kSecret = "HostSecret.leaked";
// Where the spinner is bind-mounted in the containers.
inline constexpr const char* kSpinner = "/usr/bin/jit_spinner";
#ifdef FLAMEBPF_SANITIZED
// ASan's shadow memory and quarantine roughly triple what flamebpf holds, and it runs slower.
inline constexpr long kRssBoundKb = 300 * 1024;
inline constexpr double kRunSlackSeconds = 8.0;
#else
// flamebpf's peak RSS bound for the heavy perf maps.
inline constexpr long kRssBoundKb = 100 * 1024;
// A -d N run must end within N seconds plus this (start-up, the last drain, writing).
inline constexpr double kRunSlackSeconds = 3.0;
#endif
// flamebpf's attach timeout per exchange with a JVM (hotspot::AttacherOptions).
inline constexpr double kAttachTimeoutSeconds = 5.0;

// --- running flamebpf ---

struct Measured {
  int exit_code = -1; // or 128 + signal
  bool killed = false;
  double seconds = 0;
  long max_rss_kb = 0;     // flamebpf's peak resident set (ru_maxrss, as run_meter reports it)
  double cpu_seconds = 0;  // flamebpf's user and system time
  uint64_t read_bytes = 0; // what flamebpf read with read() and its kin (rchar of /proc/<pid>/io)
  size_t max_fds = 0;      // the most descriptors it had open at once, sampled every 10 ms
  std::string out;         // stdout
  std::string log;         // stderr
};

// How flamebpf is started.
enum class RunAs {
  kCommand, // as the test's child
  // As a service manager starts a daemon: in a session of its own, without a controlling
  // terminal, stdin /dev/null, no inherited descriptor, at most 1024 descriptors (the usual
  // soft limit).
  kDaemon,
};

// The descriptors process pid has open now.
inline size_t open_fds(pid_t pid)
{
  std::error_code ignored;
  size_t count = 0;
  for (auto it = fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ignored);
       it != fs::directory_iterator(); it.increment(ignored))
    ++count;
  return count;
}

// Runs flamebpf with args, stdout and stderr apart, measuring its wall time, peak RSS, CPU time,
// reads and descriptors; kills it after limit_seconds, so that a flamebpf that blocks fails the
// test instead of hanging it. flamebpf is started by run_meter (tests/progs), whose own memory is
// small: started by the test program itself, its peak RSS would count the test program's.
inline Measured run_measured(const std::vector<std::string>& args,
                             const std::string& scratch,
                             double limit_seconds = 60,
                             RunAs as = RunAs::kCommand)
{
  std::string out_path = scratch + "/flamebpf.stdout";
  std::string log_path = scratch + "/flamebpf.stderr";
  std::string report_path = scratch + "/flamebpf.meter";
  std::vector<std::string> argv{RUN_METER_BINARY};
  if (as == RunAs::kDaemon)
    argv.emplace_back("--new-session");
  argv.insert(argv.end(), {report_path, FLAMEBPF_BINARY});
  argv.insert(argv.end(), args.begin(), args.end());
  auto started = Clock::now();
  pid_t meter = -1;
  {
    UniqueFd out(::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    UniqueFd log(::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!out.valid() || !log.valid())
      throw std::runtime_error("cannot create " + out_path + " or " + log_path);
    SpawnOptions options;
    options.output = out.get();
    options.error_output = log.get();
    // run_meter hands its limits and descriptors on to flamebpf.
    if (as == RunAs::kDaemon) {
      options.max_open_files = 1024;
      options.close_other_descriptors = true;
    }
    meter = spawn(argv, options);
  }
  // The report's first line: flamebpf's pid.
  pid_t pid = -1;
  poll_until(
      [&] {
        std::istringstream report(read_text(report_path));
        return static_cast<bool>(report >> pid);
      },
      10s, 1ms);
  if (pid <= 0) {
    ::kill(meter, SIGKILL);
    throw std::runtime_error("run_meter did not start " + std::string(FLAMEBPF_BINARY) +
                             " within 10 s (exit " +
                             std::to_string(wait_child(meter, 5s).value_or(-1)) + ")");
  }
  Measured result;
  for (;;) {
    size_t fds = open_fds(pid);
    if (wait_child(meter, 0s).has_value())
      break;
    result.max_fds = std::max(result.max_fds, fds);
    if (std::chrono::duration<double>(Clock::now() - started).count() > limit_seconds &&
        !result.killed) {
      ::kill(pid, SIGKILL);
      result.killed = true;
    }
    // Kept: the step at which descriptors are sampled.
    std::this_thread::sleep_for(10ms);
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  // The report's second line: wait status, peak RSS (KiB), user and system time (µs), rchar.
  std::istringstream report(read_text(report_path));
  int status = 0;
  long long user_us = 0;
  long long system_us = 0;
  if (!(report >> pid >> status >> result.max_rss_kb >> user_us >> system_us >> result.read_bytes))
    throw std::runtime_error("run_meter wrote no report of flamebpf to " + report_path);
  result.exit_code = exit_code(status);
  result.cpu_seconds = static_cast<double>(user_us + system_us) / 1e6;
  result.out = read_text(out_path);
  result.log = read_text(log_path);
  return result;
}

inline std::string describe(const Measured& run)
{
  return "exit " + std::to_string(run.exit_code) + (run.killed ? " (killed: it hung)" : "") +
         " after " + std::to_string(run.seconds) + " s (" + std::to_string(run.cpu_seconds) +
         " s of CPU), peak RSS " + std::to_string(run.max_rss_kb / 1024) + " MB; log:\n" + run.log;
}

inline void print_figures(const std::string& what, const Measured& run)
{
  std::printf("[ FIGURES  ] %s: %.2f s wall, %.2f s CPU, peak RSS %.1f MB\n", what.c_str(),
              run.seconds, run.cpu_seconds, static_cast<double>(run.max_rss_kb) / 1024.0);
}

// --- output checks ---

inline std::vector<std::string> split(const std::string& text, char separator)
{
  std::vector<std::string> parts;
  size_t begin = 0;
  for (size_t end; (end = text.find(separator, begin)) != std::string::npos; begin = end + 1)
    parts.push_back(text.substr(begin, end - begin));
  parts.push_back(text.substr(begin));
  return parts;
}

// What is wrong with folded text: every line must be "frame;...;frame count", with no empty frame
// and a decimal count, and the text must end with a newline. Empty if nothing.
inline std::string folded_problems(const std::string& text)
{
  if (text.empty())
    return "";
  if (text.back() != '\n')
    return "no newline at the end";
  std::string problems;
  for (const auto& line : split(text.substr(0, text.size() - 1), '\n')) {
    auto space = line.rfind(' ');
    bool counted = space != std::string::npos && space + 1 < line.size() &&
                   line.find_first_not_of("0123456789", space + 1) == std::string::npos;
    bool frames_ok = counted;
    if (counted) {
      for (const auto& frame : split(line.substr(0, space), ';'))
        frames_ok = frames_ok && !frame.empty();
    }
    if (!frames_ok)
      problems += "bad line: '" + line + "'\n";
  }
  return problems;
}

// Folded text as stack -> count (the text must pass folded_problems).
inline std::map<std::string, uint64_t> parse_folded(const std::string& text)
{
  std::map<std::string, uint64_t> folded;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    auto space = line.rfind(' ');
    if (space != std::string::npos && space + 1 < line.size())
      folded[line.substr(0, space)] += std::strtoull(line.c_str() + space + 1, nullptr, 10);
  }
  return folded;
}

// The samples of jit_spinner's main thread, the one that runs the generated code: the stacks that
// pass through none of the functions its other threads run (the map's writers, grow and replace,
// and the attach socket's server). Those threads take more or less of the CPU as the machine is
// more or less busy.
inline uint64_t spinning_samples(const std::map<std::string, uint64_t>& folded)
{
  uint64_t total = 0;
  for (const auto& [stack, count] : folded) {
    bool other_thread = false;
    std::istringstream frames(stack);
    for (std::string frame; std::getline(frames, frame, ';');)
      other_thread = other_thread || frame == "grow" || frame == "replace" || frame == "serve";
    if (!other_thread)
      total += count;
  }
  return total;
}

// Runs a program to completion; its exit code and its output (stdout and stderr).
inline std::pair<int, std::string> run_tool(const std::vector<std::string>& argv,
                                            const std::string& dir)
{
  std::string log = dir + "/tool.out";
  Child tool(argv, "", log);
  int code = tool.wait();
  return {code, read_text(log)};
}

inline size_t occurrences(const std::string& text, const std::string& needle)
{
  size_t count = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++count;
  return count;
}

// The number of <script elements in an SVG of flamebpf's own, without hostile names.
inline size_t clean_svg_scripts(const std::string& scratch)
{
  std::ofstream(scratch + "/clean.folded") << "main;work 10\n";
  auto rendered =
      run_tool({FLAMEBPF_BINARY, "render", scratch + "/clean.folded", "-o", scratch + "/clean.svg"},
               scratch);
  EXPECT_EQ(rendered.first, 0) << rendered.second;
  return occurrences(read_text(scratch + "/clean.svg"), "<script");
}

// Every file below dir (recursively), as relative paths; symlinks are listed, not followed.
inline std::set<std::string> files_below(const std::string& dir)
{
  std::set<std::string> files;
  std::error_code ignored;
  for (auto it = fs::recursive_directory_iterator(dir, ignored);
       it != fs::recursive_directory_iterator(); it.increment(ignored))
    files.insert(fs::relative(it->path(), dir).string());
  return files;
}

// --- the host side ---

// A host directory a container's links point at: /var/tmp/flamebpf-hostile.XXXXXX, holding
// perf-1.map (a map naming every address kSecret) and victim.so (kSecret). Removed on destruction.
class HostSecrets {
public:
  HostSecrets()
  {
    std::string pattern = "/var/tmp/flamebpf-hostile.XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("mkdtemp failed");
    dir_ = pattern;
    map_text_ = "0 7fffffffffff " + std::string(kSecret) + "\n";
    victim_text_ = std::string(kSecret) + " victim\n";
    std::ofstream(dir_ + "/perf-1.map") << map_text_;
    std::ofstream(dir_ + "/victim.so") << victim_text_;
  }
  ~HostSecrets()
  {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  HostSecrets(const HostSecrets&) = delete;
  HostSecrets& operator=(const HostSecrets&) = delete;

  const std::string& dir() const { return dir_; }
  std::string map() const { return dir_ + "/perf-1.map"; }
  std::string victim() const { return dir_ + "/victim.so"; }

  // The host files hold what they held at the start, and nothing else is in the directory but
  // what the test added itself (extra).
  void expect_untouched(const std::set<std::string>& extra = {}) const
  {
    EXPECT_EQ(read_text(map()), map_text_);
    EXPECT_EQ(read_text(victim()), victim_text_);
    std::set<std::string> expected{"perf-1.map", "victim.so"};
    expected.insert(extra.begin(), extra.end());
    EXPECT_EQ(files_below(dir_), expected) << "something was written into the host's " << dir_;
  }

private:
  std::string dir_;
  std::string map_text_;
  std::string victim_text_;
};

// Reports every open, read, write, creation or deletion in the watched host directories (and of
// the files in them) from construction on: what flamebpf reads through a link that escaped the
// container shows up here even if it named nothing.
class AccessWatch {
public:
  explicit AccessWatch(const std::vector<std::string>& dirs)
      : fd_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC))
  {
    if (fd_ < 0)
      throw std::runtime_error("inotify_init1 failed");
    for (const auto& dir : dirs) {
      int watch = ::inotify_add_watch(fd_, dir.c_str(),
                                      IN_OPEN | IN_ACCESS | IN_MODIFY | IN_ATTRIB | IN_CREATE |
                                          IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO);
      if (watch < 0)
        throw std::runtime_error("cannot watch " + dir);
      dirs_[watch] = dir;
    }
  }
  ~AccessWatch() { ::close(fd_); }
  AccessWatch(const AccessWatch&) = delete;
  AccessWatch& operator=(const AccessWatch&) = delete;

  // What happened so far, one line per event ("<dir>/<name>: open").
  std::vector<std::string> events()
  {
    std::vector<std::string> found;
    alignas(inotify_event) char buffer[65536];
    for (;;) {
      ssize_t n = ::read(fd_, buffer, sizeof buffer);
      if (n <= 0)
        break;
      for (char* at = buffer; at < buffer + n;) {
        const auto* event = reinterpret_cast<const inotify_event*>(at);
        std::string what = (event->mask & IN_OPEN)     ? "open"
                           : (event->mask & IN_ACCESS) ? "read"
                           : (event->mask & IN_MODIFY) ? "write"
                           : (event->mask & IN_CREATE) ? "create"
                           : (event->mask & IN_DELETE) ? "delete"
                                                       : "change";
        std::string name = event->len > 0 ? std::string(event->name) : "";
        found.push_back(dirs_[event->wd] + "/" + name + ": " + what);
        at += sizeof(inotify_event) + event->len;
      }
    }
    return found;
  }

private:
  int fd_;
  std::map<int, std::string> dirs_;
};

// Files of the JVM attach machinery in the host's temporary directories; a container's must never
// land there.
inline std::set<std::string> jvm_files_on_host()
{
  std::set<std::string> found;
  for (const char* dir : {"/tmp", "/var/tmp", "/dev/shm"}) {
    std::error_code ignored;
    for (const auto& entry : fs::directory_iterator(dir, ignored)) {
      std::string name = entry.path().filename();
      if (name.starts_with("perf-") || name.starts_with("libflamebpf-agent") ||
          name.starts_with(".attach_pid") || name.starts_with(".java_pid"))
        found.insert(std::string(dir) + "/" + name);
    }
  }
  return found;
}

// A listening UNIX socket on the host, to catch a connection that escaped a container.
class HostSocket {
public:
  explicit HostSocket(std::string path) : path_(std::move(path))
  {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::snprintf(address.sun_path, sizeof address.sun_path, "%s", path_.c_str());
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(fd_, 8) != 0)
      throw std::runtime_error("cannot listen on " + path_);
    ::chmod(path_.c_str(), 0600);
  }
  ~HostSocket()
  {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  HostSocket(const HostSocket&) = delete;
  HostSocket& operator=(const HostSocket&) = delete;

  // Whether anything connected since it was made.
  bool connected() const
  {
    int connection = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection >= 0)
      ::close(connection);
    return connection >= 0;
  }

private:
  std::string path_;
  int fd_ = -1;
};

// --- the fixture ---

class HostileContainerTest : public ::testing::Test {
protected:
  void SetUp() override
  {
    ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
    host_jvm_files_ = jvm_files_on_host();
    image_ = docker_.burner_image();
  }

  void TearDown() override
  {
    EXPECT_EQ(jvm_files_on_host(), host_jvm_files_)
        << "a perf map, agent or attach file appeared in the host's /tmp, /var/tmp or /dev/shm";
  }

  // Runs `jit_spinner args...` as the main process (PID 1) of container name and waits until its
  // perf map is in place.
  DockerDaemon::Container spin(const std::string& name,
                               const std::vector<std::string>& args,
                               std::vector<std::string> options = {})
  {
    options.insert(options.begin(),
                   {"-v", std::string(JIT_SPINNER_BINARY) + ":" + kSpinner + ":ro"});
    std::vector<std::string> command{kSpinner};
    command.insert(command.end(), args.begin(), args.end());
    auto container = docker_.run(name, options, image_, command);
    docker_.wait_for_output(name, "spinner ready", 30s);
    return container;
  }

  // Starts `jit_spinner args...` as another process of a running container and returns its host
  // pid once its name is comm (as /proc/<pid>/comm shows it, without the newline).
  pid_t spin_another(const DockerDaemon::Container& container,
                     const std::string& comm,
                     const std::vector<std::string>& args)
  {
    std::vector<std::string> command{"exec", "-d", container.name, kSpinner};
    command.insert(command.end(), args.begin(), args.end());
    docker_.docker(command);
    pid_t found = -1;
    wait_until(
        [&] {
          std::istringstream procs(read_text(container.cgroup2_path + "/cgroup.procs"));
          for (pid_t pid; procs >> pid;) {
            if (read_text("/proc/" + std::to_string(pid) + "/comm") == comm + "\n")
              found = pid;
          }
          return found > 0;
        },
        10s, "a process named '" + comm + "' in " + container.name, 25ms);
    return found;
  }

  // The perf map of a process is written (its "spinner ready" may not be in any log).
  static void wait_for_map(pid_t pid)
  {
    std::string status = read_text("/proc/" + std::to_string(pid) + "/status");
    auto at = status.find("NSpid:");
    ASSERT_NE(at, std::string::npos);
    std::istringstream fields(status.substr(at + 6, status.find('\n', at) - at - 6));
    std::string ns_pid;
    for (std::string field; fields >> field;)
      ns_pid = field;
    std::string map = "/proc/" + std::to_string(pid) + "/root/tmp/perf-" + ns_pid + ".map";
    wait_until(
        [&] {
          std::error_code ignored;
          return fs::file_size(map, ignored) > 0;
        },
        10s, map + " to be written", 25ms);
  }

  // Nothing of the host's secrets in any output or log.
  static void expect_no_secret(const Measured& run, const std::string& out_dir)
  {
    EXPECT_EQ(run.log.find(kSecret), std::string::npos) << run.log;
    EXPECT_EQ(run.out.find(kSecret), std::string::npos);
    for (const auto& file : files_below(out_dir))
      EXPECT_EQ(read_text(out_dir + "/" + file).find(kSecret), std::string::npos) << file;
  }

  // The run ended normally within duration plus kRunSlackSeconds (plus extra).
  static void expect_prompt(const Measured& run, double duration, double extra = 0)
  {
    EXPECT_EQ(run.exit_code, 0) << describe(run);
    EXPECT_FALSE(run.killed) << describe(run);
    EXPECT_LT(run.seconds, duration + kRunSlackSeconds + extra) << describe(run);
  }

  // A heavy perf map: one spinner (posing as a JVM when jvm, so that its map is polled four
  // times a second), profiled for 3 s; checks the time, the memory, that the valid line was read
  // (leaf_name) and that the map was not read beyond the container. Returns the run.
  Measured profile_heavy_map(const std::string& name,
                             const std::vector<std::string>& spinner_args,
                             const std::string& leaf_name,
                             bool jvm)
  {
    std::vector<std::string> args;
    if (jvm)
      args = {"--jvm", "-XX:+PreserveFramePointer"};
    args.insert(args.end(), spinner_args.begin(), spinner_args.end());
    spin(name, args);
    std::string out = dir_.path().string() + "/out";
    fs::create_directories(out);
    auto run = run_measured(
        {"--cgroup", name, "--no-attach", "-d", "3", "-o", out + "/" + name + ".folded"},
        dir_.path());
    print_figures(name, run);
    expect_prompt(run, 3);
    EXPECT_LT(run.max_rss_kb, kRssBoundKb) << describe(run);
    std::string folded = read_text(out + "/" + name + ".folded");
    EXPECT_EQ(folded_problems(folded), "");
    auto stacks = parse_folded(folded);
    EXPECT_GT(total_count(stacks), 30u) << describe(run);
    // The valid line still names the code, whatever came before or after it.
    EXPECT_GT(count_containing(stacks, leaf_name), spinning_samples(stacks) / 2)
        << folded << describe(run);
    expect_no_secret(run, out);
    return run;
  }

  // A fake JVM whose attach socket behaves as socket_kind, profiled for 3 s: the run ends on time
  // (plus one attach timeout when timeout_expected), with one line about the JVM saying the agent
  // could not be loaded. Returns the run and that line.
  std::pair<Measured, std::string>
  profile_fake_jvm(const std::string& name, const std::string& socket_kind, bool timeout_expected)
  {
    // It maps a file named libjvm.so and claims -XX:+PreserveFramePointer, so flamebpf attaches to
    // it and has nothing else to warn about.
    auto jvm = spin(name, {"--jvm", "-XX:+PreserveFramePointer", "--socket", socket_kind, "none"});
    std::string scratch = dir_.path();
    auto run = run_measured({"--cgroup", name, "-d", "3", "-o", scratch + "/out.folded"}, scratch);
    print_figures(socket_kind + " attach socket", run);
    expect_prompt(run, 3, timeout_expected ? kAttachTimeoutSeconds : 0);
    EXPECT_EQ(folded_problems(read_text(scratch + "/out.folded")), "");
    auto about_jvm = lines_with(run.log, "JVM " + std::to_string(jvm.pid) + " ");
    EXPECT_EQ(about_jvm.size(), 1u) << run.log;
    std::string line = about_jvm.empty() ? "" : about_jvm[0];
    EXPECT_NE(line.find("cannot load flamebpf's agent"), std::string::npos) << run.log;
    return {run, line};
  }

  DockerDaemon& docker_ = DockerDaemon::shared();
  ContainersRemovedAtEnd containers_removed_{docker_};
  std::string image_;
  TempDir dir_;
  std::set<std::string> host_jvm_files_;
};

} // namespace flamebpf::testing
