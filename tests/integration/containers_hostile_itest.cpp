// flamebpf against hostile containers (issue "Hardening", point 1). A container owns its /tmp, so
// it can make its perf map, its /tmp or the agent's drop path a symlink (absolute, relative,
// through /proc/self), a FIFO, a device, a sparse 10 GB file, a file that grows while flamebpf
// reads it, a file of 1 MB lines, binary garbage or addresses that overflow; it can pose as a JVM
// whose attach socket never answers or answers garbage; and it can forge process and cgroup names
// with ';', newlines, "_[k]" and markup. Through all of that flamebpf must read and write nothing
// outside the container's root, never block, keep its memory bounded, count what it skipped, and
// write folded, SVG and pprof output that still parse.
//
// The workload is tests/progs/jit_spinner, bind-mounted into the burner image: it spins in code it
// generated in anonymous executable memory, which flamebpf names from the process's perf map, so
// every hostile perf map is read without a JVM.
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
#include "jvm/agent_installer.h"
#include "jvm/agent_library.h"
#include "pprof_tool.h"

#ifndef JIT_SPINNER_BINARY
#error "define JIT_SPINNER_BINARY as the path of the jit_spinner program (tests/CMakeLists.txt)"
#endif

namespace flamebpf::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// In every host file a container may point at; it must never show up in any output.
constexpr const char* kSecret = "HostSecret.leaked";
// Where the spinner is bind-mounted in the containers.
constexpr const char* kSpinner = "/usr/bin/jit_spinner";
#ifdef FLAMEBPF_SANITIZED
// ASan's shadow memory and quarantine roughly triple what flamebpf holds, and it runs slower.
constexpr long kRssBoundKb = 300 * 1024;
constexpr double kRunSlackSeconds = 8.0;
#else
// flamebpf's peak RSS bound for the heavy perf maps.
constexpr long kRssBoundKb = 100 * 1024;
// A -d N run must end within N seconds plus this (start-up, the last drain, writing).
constexpr double kRunSlackSeconds = 3.0;
#endif
// flamebpf's attach timeout per exchange with a JVM (jvm::AttacherOptions).
constexpr double kAttachTimeoutSeconds = 5.0;

// --- running flamebpf ---

struct Measured {
  int exit_code = -1; // or 128 + signal
  bool killed = false;
  double seconds = 0;
  long max_rss_kb = 0; // flamebpf's peak resident set (wait4's ru_maxrss)
  std::string out;     // stdout
  std::string log;     // stderr
};

// Runs flamebpf with args, stdout and stderr apart, measuring its wall time and peak RSS; kills it
// after limit_seconds, so that a flamebpf that blocks fails the test instead of hanging it.
Measured run_measured(const std::vector<std::string>& args,
                      const std::string& scratch,
                      double limit_seconds = 60)
{
  std::string out_path = scratch + "/flamebpf.stdout";
  std::string log_path = scratch + "/flamebpf.stderr";
  std::vector<std::string> argv{FLAMEBPF_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  auto started = Clock::now();
  pid_t pid = ::fork();
  if (pid < 0)
    throw std::runtime_error("fork failed");
  if (pid == 0) {
    int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0 || log < 0)
      ::_exit(126);
    ::dup2(out, 1);
    ::dup2(log, 2);
    std::vector<char*> raw;
    for (auto& arg : argv)
      raw.push_back(arg.data());
    raw.push_back(nullptr);
    ::execv(raw[0], raw.data());
    ::_exit(127);
  }
  Measured result;
  int status = 0;
  rusage usage{};
  for (;;) {
    pid_t done = ::wait4(pid, &status, WNOHANG, &usage);
    if (done == pid)
      break;
    if (std::chrono::duration<double>(Clock::now() - started).count() > limit_seconds &&
        !result.killed) {
      ::kill(pid, SIGKILL);
      result.killed = true;
    }
    std::this_thread::sleep_for(10ms);
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.max_rss_kb = usage.ru_maxrss;
  result.out = read_text(out_path);
  result.log = read_text(log_path);
  return result;
}

std::string describe(const Measured& run)
{
  return "exit " + std::to_string(run.exit_code) + (run.killed ? " (killed: it hung)" : "") +
         " after " + std::to_string(run.seconds) + " s, peak RSS " +
         std::to_string(run.max_rss_kb / 1024) + " MB; log:\n" + run.log;
}

void print_figures(const std::string& what, const Measured& run)
{
  std::printf("[ FIGURES  ] %s: %.2f s wall, peak RSS %.1f MB\n", what.c_str(), run.seconds,
              static_cast<double>(run.max_rss_kb) / 1024.0);
}

// Lines of text containing needle.
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

// --- output checks ---

std::vector<std::string> split(const std::string& text, char separator)
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
std::string folded_problems(const std::string& text)
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
std::map<std::string, uint64_t> parse_folded(const std::string& text)
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

// Runs a program to completion; its exit code and its output (stdout and stderr).
std::pair<int, std::string> run_tool(const std::vector<std::string>& argv, const std::string& dir)
{
  std::string log = dir + "/tool.out";
  Child tool(argv, "", log);
  int code = tool.wait();
  return {code, read_text(log)};
}

size_t occurrences(const std::string& text, const std::string& needle)
{
  size_t count = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++count;
  return count;
}

// The number of <script elements in an SVG of flamebpf's own, without hostile names.
size_t clean_svg_scripts(const std::string& scratch)
{
  std::ofstream(scratch + "/clean.folded") << "main;work 10\n";
  auto rendered =
      run_tool({FLAMEBPF_BINARY, "render", scratch + "/clean.folded", "-o", scratch + "/clean.svg"},
               scratch);
  EXPECT_EQ(rendered.first, 0) << rendered.second;
  return occurrences(read_text(scratch + "/clean.svg"), "<script");
}

// Every file below dir (recursively), as relative paths; symlinks are listed, not followed.
std::set<std::string> files_below(const std::string& dir)
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
std::set<std::string> jvm_files_on_host()
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
    for (int attempt = 0; attempt < 400; ++attempt) {
      std::istringstream procs(read_text(container.cgroup2_path + "/cgroup.procs"));
      for (pid_t pid; procs >> pid;) {
        if (read_text("/proc/" + std::to_string(pid) + "/comm") == comm + "\n")
          return pid;
      }
      std::this_thread::sleep_for(25ms);
    }
    ADD_FAILURE() << "no process named '" << comm << "' in " << container.name;
    return -1;
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
    for (int attempt = 0; attempt < 400; ++attempt) {
      std::error_code ignored;
      if (fs::file_size(map, ignored) > 0)
        return;
      std::this_thread::sleep_for(25ms);
    }
    FAIL() << map << " never appeared";
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
    std::string out = dir_.path() + "/out";
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
    EXPECT_GT(count_containing(stacks, leaf_name), total_count(stacks) / 2)
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

  DockerDaemon docker_;
  std::string image_;
  TempDir dir_;
  std::set<std::string> host_jvm_files_;
};

// --- perf maps ---

TEST_F(HostileContainerTest, PerfMapLinksAndSpecialFilesReadNothingOutsideTheContainer)
{
  HostSecrets host;
  const std::string& hostdir = host.dir();
  std::string up = "../../../../../../../.."; // more ".." than /tmp has parents
  // name -> the spinner's arguments. hl-control's valid map shows that the others' maps would
  // be read if they were acceptable.
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases{
      {"hl-control", {"valid", "JitSpinner.control"}},
      {"hl-abs", {"--link", "/tmp/perf-%p.map=" + host.map(), "none"}},
      {"hl-rel", {"--link", "/tmp/perf-%p.map=" + up + host.map(), "none"}},
      {"hl-proc-root", {"--link", "/tmp/perf-%p.map=/proc/self/root" + host.map(), "none"}},
      {"hl-proc-cwd", {"--link", "/tmp/perf-%p.map=/proc/self/cwd" + host.map(), "none"}},
      {"hl-zero", {"--link", "/tmp/perf-%p.map=/dev/zero", "none"}},
      {"hl-fifo", {"fifo"}},
      {"hl-device", {"device"}},
      {"hl-tmp-abs", {"--link", "/tmp=" + hostdir, "none"}},
      {"hl-tmp-rel", {"--link", "/tmp=" + up + hostdir, "none"}},
      // The link's target exists in the container too: flamebpf reads the container's map there.
      {"hl-tmp-inside",
       {"--mkdir", "/var", "--mkdir", "/var/tmp", "--mkdir", hostdir, "--link", "/tmp=" + hostdir,
        "valid", "Inside.ok"}},
  };
  for (const auto& [name, args] : cases)
    spin(name, args);

  AccessWatch watch({hostdir});
  std::string out = dir_.path() + "/out";
  fs::create_directories(out);
  auto run = run_measured(
      {"--all-containers", "--containers-only", "-d", "3", "-o", out + "/links.folded"},
      dir_.path());
  auto accesses = watch.events();
  print_figures("links and special files", run);
  expect_prompt(run, 3);
  EXPECT_TRUE(accesses.empty()) << "flamebpf touched the host's files:\n"
                                << ::testing::PrintToString(accesses);
  expect_no_secret(run, out);
  host.expect_untouched();

  for (const auto& [name, args] : cases) {
    std::string file = out + "/links." + name + ".folded";
    std::string text = read_text(file);
    EXPECT_EQ(folded_problems(text), "") << name;
    auto stacks = parse_folded(text);
    uint64_t samples = total_count(stacks);
    EXPECT_GT(samples, 10u) << name << " was hardly sampled\n" << describe(run);
    uint64_t named =
        count_containing(stacks, "JitSpinner.control") + count_containing(stacks, "Inside.ok");
    if (name == "hl-control" || name == "hl-tmp-inside") {
      EXPECT_GT(named * 2, samples) << name << ": its own map was not read\n" << text;
    } else {
      // Nothing named the generated code: the leaf stays unknown.
      EXPECT_EQ(named, 0u) << name << "\n" << text;
      EXPECT_GT(count_containing(stacks, "[unknown]") * 2, samples) << name << "\n" << text;
    }
  }
}

TEST_F(HostileContainerTest, SparseTenGigabyteMapIsReadInBoundedSteps)
{
  auto run =
      profile_heavy_map("hm-sparse", {"sparse", "JitSpinner.sparse"}, "JitSpinner.sparse", true);
  // The hole is one endless line of NULs: skipped, and said once.
  auto warnings = lines_with(run.log, "/root/tmp/perf-1.map: skipped ");
  EXPECT_EQ(warnings.size(), 1u) << run.log;
}

TEST_F(HostileContainerTest, MapThatGrowsWhileReadKeepsMemoryBounded)
{
  // 64 MiB/s of new distinct entries, the map polled four times a second.
  profile_heavy_map("hm-grow", {"grow", "JitSpinner.grow"}, "JitSpinner.grow", true);
}

TEST_F(HostileContainerTest, MegabyteLinesAreSkippedAndCounted)
{
  auto run = profile_heavy_map("hm-long", {"long", "JitSpinner.long"}, "JitSpinner.long", false);
  auto warnings = lines_with(run.log, "/root/tmp/perf-1.map: skipped 64 malformed lines");
  EXPECT_EQ(warnings.size(), 1u) << run.log;
}

TEST_F(HostileContainerTest, GarbageAndOverflowingAddressesAreSkippedAndCounted)
{
  auto run = profile_heavy_map("hm-garbage", {"garbage", "JitSpinner.garbage"},
                               "JitSpinner.garbage", false);
  auto warnings = lines_with(run.log, "/root/tmp/perf-1.map: skipped ");
  ASSERT_EQ(warnings.size(), 1u) << run.log;
  // At least the nine overflowing or malformed lines after the noise.
  auto at = warnings[0].find("skipped ") + 8;
  EXPECT_GE(std::strtoull(warnings[0].c_str() + at, nullptr, 10), 9u) << warnings[0];
  EXPECT_EQ(run.log.find("Overflow."), std::string::npos) << run.log;
  EXPECT_EQ(read_text(dir_.path() + "/out/hm-garbage.folded").find("Overflow."), std::string::npos);
}

// --- JVM attach ---

// A fake JVM: maps a file named libjvm.so and claims -XX:+PreserveFramePointer, so flamebpf
// attaches to it and has nothing else to warn about.
std::vector<std::string> fake_jvm(const std::vector<std::string>& extra)
{
  std::vector<std::string> args{"--jvm", "-XX:+PreserveFramePointer"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TEST_F(HostileContainerTest, SilentAttachSocketCostsOneTimeout)
{
  auto [run, line] = profile_fake_jvm("ha-silent", "silent", true);
  EXPECT_NE(line.find("timeout"), std::string::npos) << run.log;
}

TEST_F(HostileContainerTest, GarbageAttachReplyFailsAtOnce)
{
  auto [run, line] = profile_fake_jvm("ha-garbage", "garbage", false);
  // The reply's markup and bytes are not passed on raw.
  EXPECT_EQ(run.log.find("\xde\xad"), std::string::npos) << run.log;
}

TEST_F(HostileContainerTest, EndlessAttachReplyCostsOneTimeoutAndBoundedMemory)
{
  auto [run, line] = profile_fake_jvm("ha-flood", "flood", true);
  EXPECT_LT(run.max_rss_kb, kRssBoundKb) << describe(run);
}

TEST_F(HostileContainerTest, AgentFollowsATmpLinkOnlyInsideTheContainer)
{
  HostSecrets host;
  // The container's /tmp is a link to a path that exists on the host and in the container.
  auto jvm =
      spin("hd-tmp", fake_jvm({"--mkdir", "/var", "--mkdir", "/var/tmp", "--mkdir", host.dir(),
                               "--link", "/tmp=" + host.dir(), "--socket", "garbage", "none"}));
  AccessWatch watch({host.dir()});
  auto run = run_measured({"--cgroup", "hd-tmp", "-d", "3", "-o", dir_.path() + "/out.folded"},
                          dir_.path());
  auto accesses = watch.events();
  expect_prompt(run, 3);
  EXPECT_TRUE(accesses.empty()) << ::testing::PrintToString(accesses);
  host.expect_untouched();
  // The agent went where the link leads inside the container.
  std::string inside = "/proc/" + std::to_string(jvm.pid) + "/root" + host.dir() + "/" +
                       jvm::agent_file_name(jvm::agent_library());
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(inside))) << inside << "\n" << run.log;
  auto about_jvm = lines_with(run.log, "JVM " + std::to_string(jvm.pid) + " ");
  EXPECT_EQ(about_jvm.size(), 1u) << run.log;
}

TEST_F(HostileContainerTest, PlantedAgentAndSocketLinksAreRefused)
{
  HostSecrets host;
  HostSocket host_socket(host.dir() + "/host.sock");
  std::string agent = jvm::agent_file_name(jvm::agent_library());
  // Every place the agent could go is a link to the host: the agent's own name in /tmp, the whole
  // of /var/tmp; /dev/shm is mounted noexec.
  auto planted = spin("hd-agent",
                      fake_jvm({"--link", "/tmp/" + agent + "=" + host.victim(), "--mkdir", "/var",
                                "--link", "/var/tmp=" + host.dir(), "--socket", "silent", "none"}));
  // The attach socket is a link to a socket of the host.
  auto socket_link = spin(
      "hd-socket", fake_jvm({"--link", "/tmp/.java_pid%p=" + host.dir() + "/host.sock", "none"}));
  AccessWatch watch({host.dir()});
  auto run = run_measured(
      {"--all-containers", "--containers-only", "-d", "3", "-o", dir_.path() + "/out.folded"},
      dir_.path());
  auto accesses = watch.events();
  print_figures("planted agent and socket links", run);
  expect_prompt(run, 3);
  EXPECT_TRUE(accesses.empty()) << ::testing::PrintToString(accesses);
  EXPECT_FALSE(host_socket.connected()) << "flamebpf connected to the host's socket";
  host.expect_untouched({"host.sock"});
  for (pid_t pid : {planted.pid, socket_link.pid}) {
    auto about_jvm = lines_with(run.log, "JVM " + std::to_string(pid) + " ");
    ASSERT_EQ(about_jvm.size(), 1u) << run.log;
    EXPECT_NE(about_jvm[0].find("cannot load flamebpf's agent"), std::string::npos) << run.log;
  }
  // The links are still links.
  std::string root = "/proc/" + std::to_string(planted.pid) + "/root";
  EXPECT_TRUE(fs::is_symlink(root + "/tmp/" + agent));
  EXPECT_TRUE(fs::is_symlink(root + "/var/tmp"));
}

TEST_F(HostileContainerTest, RealJvmWithAFifoForItsPerfMapKeepsRunning)
{
  std::string java = std::string(kContainerJavaHome) + "/bin/java";
  auto jvm = docker_.run(
      "hj-fifo", {}, docker_.java_image(JavaVersion::kJdk17),
      {java, "-XX:+PreserveFramePointer", "-cp", std::string(kContainerAppDir), "Burner", "30"});
  docker_.wait_for_output("hj-fifo", "burner ready");
  std::string map = "/proc/" + std::to_string(jvm.pid) + "/root/tmp/perf-1.map";
  ASSERT_EQ(::mkfifo(map.c_str(), 0666), 0) << std::strerror(errno);
  auto run = run_measured({"--cgroup", "hj-fifo", "-d", "3", "-o", dir_.path() + "/out.folded"},
                          dir_.path());
  print_figures("real JVM, FIFO perf map", run);
  expect_prompt(run, 3, kAttachTimeoutSeconds);
  auto about_jvm = lines_with(run.log, "JVM " + std::to_string(jvm.pid) + " ");
  ASSERT_EQ(about_jvm.size(), 1u) << run.log;
  EXPECT_NE(about_jvm[0].find("cannot load flamebpf's agent"), std::string::npos) << run.log;
  auto stacks = read_folded(dir_.path() + "/out.folded");
  EXPECT_GT(count_with_prefix(stacks, "java;"), 100u) << run.log;
  // The JVM neither hangs nor dies: it still answers jcmd-less liveness (its process runs and is
  // not stopped in the agent's open).
  EXPECT_EQ(docker_.docker({"inspect", "-f", "{{.State.Running}}", "hj-fifo"}), "true");
  struct stat status {};
  ASSERT_EQ(::lstat(map.c_str(), &status), 0);
  EXPECT_TRUE(S_ISFIFO(status.st_mode));
}

// --- forged names ---

// Names of frames the spinners' perf maps give their generated code, outermost first; escapes as
// jit_spinner decodes them. None may add, split or drop a frame, or inject markup.
const std::vector<std::string> kHostileFrames{
    "Hostile.outer",
    "semi;colon;frame",
    "</text><script>alert(1)</script><evil/>",
    "fake_[k]",
    "tab\\there\\x0dcr",
    "ctl\\x01\\x1b[31mred",
    "utf8 \\xff\\xfe\\xc0\\x80 bad",
    "ends with a count 12345",
    "Hostile.leaf",
};

// Process names (at most 15 bytes), escaped likewise.
const std::vector<std::string> kHostileComms{
    "semi;colon;x", "nl\\nfake;c 99", "kern_[k]", "</text><script>", "amp&<evil/>\\xff",
};

std::string unescaped(const std::string& text)
{
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == 'n') {
      out += '\n';
      ++i;
    } else if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == 't') {
      out += '\t';
      ++i;
    } else if (text[i] == '\\' && i + 3 < text.size() && text[i + 1] == 'x') {
      out += static_cast<char>(std::stoi(text.substr(i + 2, 2), nullptr, 16));
      i += 3;
    } else {
      out += text[i];
    }
  }
  return out;
}

// Checks folded text of the forged-name processes: it parses, and in every stack through the
// generated code each process name and each frame name is exactly one frame (the hostile frames
// are the last kHostileFrames.size() before any kernel frames, and the process name is at the
// same place in every such stack). Returns the number of samples through the generated code.
uint64_t
expect_names_kept_apart(const std::string& folded, size_t comm_index, const std::string& context)
{
  EXPECT_EQ(folded_problems(folded), "") << context;
  uint64_t through = 0;
  std::set<std::string> comms;
  for (const auto& [stack, count] : parse_folded(folded)) {
    if (stack.find("Hostile.leaf") == std::string::npos)
      continue;
    through += count;
    auto frames = split(stack, ';');
    auto outer = std::find_if(frames.begin(), frames.end(),
                              [](const std::string& f) { return f.starts_with("Hostile.outer"); });
    EXPECT_NE(outer, frames.end()) << stack;
    if (outer == frames.end())
      continue;
    size_t first = static_cast<size_t>(outer - frames.begin());
    EXPECT_GE(frames.size(), first + kHostileFrames.size()) << stack;
    if (frames.size() >= first + kHostileFrames.size()) {
      EXPECT_TRUE(frames[first + kHostileFrames.size() - 1].starts_with("Hostile.leaf")) << stack;
    }
    if (comm_index < frames.size())
      comms.insert(frames[comm_index]);
  }
  // One process name per spinner, each a frame of its own.
  EXPECT_EQ(comms.size(), kHostileComms.size() + 1) << ::testing::PrintToString(comms) << context;
  return through;
}

// What is wrong with an SVG of flamebpf's: not well-formed XML, more <script> elements than
// flamebpf's own (scripts), or an injected <evil> element.
std::string svg_problems(const std::string& path, size_t scripts, const std::string& scratch)
{
  std::string problems;
  auto lint = run_tool({"/usr/bin/xmllint", "--noout", path}, scratch);
  if (lint.first != 0)
    problems += "xmllint: " + lint.second;
  auto evil =
      run_tool({"/usr/bin/xmllint", "--xpath", "count(//*[local-name()='evil'])", path}, scratch);
  if (evil.second.find('0') != 0)
    problems += "injected elements: " + evil.second;
  std::string text = read_text(path);
  if (occurrences(text, "<script") != scripts)
    problems += std::to_string(occurrences(text, "<script")) + " <script elements";
  if (text.find("<evil") != std::string::npos)
    problems += "raw <evil";
  return problems;
}

TEST_F(HostileContainerTest, ForgedProcessFrameAndCgroupNamesCannotBreakTheOutput)
{
  std::vector<std::string> frames_mode{"valid"};
  frames_mode.insert(frames_mode.end(), kHostileFrames.begin(), kHostileFrames.end());
  auto with_comm = [&](const std::string& comm) {
    std::vector<std::string> args{"--comm", comm};
    args.insert(args.end(), frames_mode.begin(), frames_mode.end());
    return args;
  };
  auto names = spin("hn-names", with_comm("plain"));
  for (const auto& comm : kHostileComms) {
    pid_t pid = spin_another(names, unescaped(comm), with_comm(comm));
    ASSERT_GT(pid, 0);
    wait_for_map(pid);
  }

  // A sub-cgroup of another container, named by whoever made it (a runtime, an orchestrator);
  // the kernel refuses newlines in cgroup names (and '/' is the path separator), so it gets the
  // rest.
  auto cg = spin("hn-cgroup", {"--comm", "cgspin", "valid", "Cgroup.leaf"});
  std::string hostile = cg.cgroup2_path + "/evil;x\ny_[k] <script>&amp;<evil a=\"'\">";
  if (::mkdir(hostile.c_str(), 0755) != 0) {
    ASSERT_EQ(errno, EINVAL) << hostile << ": " << std::strerror(errno);
    hostile = cg.cgroup2_path + "/evil;x y_[k] <script>&amp;<evil a=\"'\">";
    ASSERT_EQ(::mkdir(hostile.c_str(), 0755), 0) << std::strerror(errno);
  }
  std::ofstream(hostile + "/cgroup.procs") << cg.pid;
  ASSERT_NE(read_text("/proc/" + std::to_string(cg.pid) + "/cgroup").find("evil;x"),
            std::string::npos);
  std::string hostile_target = hostile.substr(cgroup2_mount().size() + 1);
  std::this_thread::sleep_for(300ms);

  // Folded on stdout, every stack led by its target's name.
  auto streamed = run_measured(
      {"--cgroup", "hn-names", "--cgroup", hostile_target, "-d", "3", "-o", "-"}, dir_.path());
  print_figures("forged names, folded on stdout", streamed);
  expect_prompt(streamed, 3);
  uint64_t through = expect_names_kept_apart(streamed.out, 1, streamed.log);
  EXPECT_GT(through, 100u) << streamed.log;
  std::set<std::string> targets;
  uint64_t cgroup_samples = 0;
  for (const auto& [stack, count] : parse_folded(streamed.out)) {
    auto frames = split(stack, ';');
    targets.insert(frames[0]);
    if (frames.size() > 1 && frames[1] == "cgspin")
      cgroup_samples += count;
  }
  // Two targets, each one frame; the hostile cgroup's samples under one name.
  EXPECT_EQ(targets.size(), 2u) << ::testing::PrintToString(targets);
  EXPECT_GT(cgroup_samples, 30u) << streamed.out;

  // Agent mode: every format, one directory per target, nothing outside the output directory.
  std::string parent = dir_.path() + "/agent";
  fs::create_directories(parent);
  std::string out = parent + "/dumps";
  auto dumped = run_measured({"--cgroup", "hn-names", "--cgroup", hostile_target, "--output-dir",
                              out, "--interval", "2", "-d", "3", "--format", "folded,svg,pprof"},
                             dir_.path());
  print_figures("forged names, agent dumps", dumped);
  expect_prompt(dumped, 3);
  EXPECT_EQ(files_below(parent).count("dumps"), 1u);
  std::set<std::string> top_level;
  for (const auto& entry : fs::directory_iterator(parent))
    top_level.insert(entry.path().filename());
  EXPECT_EQ(top_level, std::set<std::string>{"dumps"});

  std::string go = find_go();
  ASSERT_FALSE(go.empty()) << "go tool pprof is needed: install golang-go";
  size_t scripts = clean_svg_scripts(dir_.path());
  size_t target_dirs = 0;
  std::string names_folded; // every window of hn-names
  for (const auto& entry : fs::directory_iterator(out)) {
    std::string name = entry.path().filename();
    if (name == "flamebpf-stats.jsonl")
      continue;
    ASSERT_TRUE(entry.is_directory()) << name;
    ++target_dirs;
    EXPECT_EQ(name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                     "0123456789._-"),
              std::string::npos)
        << "target directory '" << name << "'";
    for (const auto& file : fs::directory_iterator(entry.path())) {
      std::string path = file.path().string();
      if (file.is_symlink())
        continue; // latest.* -> a dump beside it
      if (path.ends_with(".folded")) {
        std::string text = read_text(path);
        EXPECT_EQ(folded_problems(text), "") << path;
        if (name == "hn-names")
          names_folded += text;
      } else if (path.ends_with(".svg")) {
        EXPECT_EQ(svg_problems(path, scripts, dir_.path()), "") << path;
      } else if (path.ends_with(".pb.gz")) {
        std::string top = PprofTool(go, dir_.path()).run({"-top", "-nodecount=200"}, path);
        if (name == "hn-names") {
          EXPECT_NE(top.find("Hostile.leaf"), std::string::npos) << top;
        }
      } else {
        ADD_FAILURE() << "unexpected file " << path;
      }
    }
  }
  EXPECT_EQ(target_dirs, 2u) << ::testing::PrintToString(files_below(out));
  EXPECT_GT(expect_names_kept_apart(names_folded, 0, dumped.log), 50u) << dumped.log;
}

} // namespace
} // namespace flamebpf::testing
