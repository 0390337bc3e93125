// Runs a program under a seccomp profile in the OCI (and Docker) JSON format, the one of
// deploy/seccomp/flamebpf.json: the integration tests start flamebpf through it, so that each test
// checks the profile the DaemonSet and the systemd unit ship.
//
//   seccomp_launcher [--mode MODE] [--report FILE] PROFILE PROGRAM [ARG]...
//
// MODE, or $FLAMEBPF_SECCOMP when there is no --mode (enforce when that is unset too):
//   enforce     A system call outside the profile stops PROGRAM: the call is named on stderr and
//               appended to FILE, and PROGRAM is killed (SIGKILL). A node answers such a call with
//               EPERM, which one of flamebpf's fallbacks could take (a feature probed and left
//               off, a file skipped) and a test pass without the call it needs; a kill cannot.
//   learn       Every call outside the profile is named once (stderr and FILE) and let through:
//               all that a run lacks, in one run.
//   as-written  The profile's own default action (EPERM), as a container runtime applies it.
//   off         No filter at all (scripts/seccomp-profile records flamebpf's calls so).
// In enforce and learn, the filter hands each call outside the profile to a supervisor (seccomp's
// user notification): a process cloned before the filter is loaded, sharing the descriptor table
// until then, which gets the listener that way and ends when PROGRAM ends. PROGRAM keeps this
// process's pid, so the caller's signals and waits reach it. As runc does, the filter is loaded
// without no_new_privs when the launcher holds CAP_SYS_ADMIN, and with it otherwise.
//
// The profile's rules must allow calls by name, without argument conditions (what the OCI format
// allows beyond that, flamebpf's profile does not use). Exit status: PROGRAM's; 125 if the profile
// cannot be applied, 127 if PROGRAM cannot be run.
#include <atomic>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <linux/capability.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <nlohmann/json.hpp>
#include <optional>
#include <poll.h>
#include <seccomp.h>
#include <set>
#include <string>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace {

constexpr int kCannotApply = 125;
constexpr int kCannotRun = 127;

enum class Mode { enforce, learn, as_written, off };

struct Options {
  Mode mode = Mode::enforce;
  std::string report;
  std::string profile;
  std::vector<char*> program; // PROGRAM and its arguments, null-terminated
};

struct Profile {
  uint32_t default_action = 0;
  std::vector<uint32_t> architectures;
  std::vector<std::string> allowed;
};

[[noreturn]] void fail(const std::string& message)
{
  std::fprintf(stderr, "seccomp_launcher: %s\n", message.c_str());
  std::exit(kCannotApply);
}

std::optional<Mode> parse_mode(const std::string& text)
{
  if (text.empty() || text == "enforce")
    return Mode::enforce;
  if (text == "learn")
    return Mode::learn;
  if (text == "as-written")
    return Mode::as_written;
  if (text == "off")
    return Mode::off;
  return std::nullopt;
}

Options parse_options(int argc, char** argv)
{
  Options options;
  const char* from_environment = std::getenv("FLAMEBPF_SECCOMP");
  std::string mode = from_environment ? from_environment : "";
  int i = 1;
  for (; i + 1 < argc && std::strncmp(argv[i], "--", 2) == 0; i += 2) {
    if (std::strcmp(argv[i], "--mode") == 0)
      mode = argv[i + 1];
    else if (std::strcmp(argv[i], "--report") == 0)
      options.report = argv[i + 1];
    else
      fail(std::string("unknown option ") + argv[i]);
  }
  if (argc - i < 2)
    fail("usage: seccomp_launcher [--mode enforce|learn|as-written|off] [--report FILE] PROFILE "
         "PROGRAM [ARG]...");
  auto parsed = parse_mode(mode);
  if (!parsed)
    fail("unknown mode " + mode + " (enforce, learn, as-written or off)");
  options.mode = *parsed;
  options.profile = argv[i];
  options.program.assign(argv + i + 1, argv + argc);
  options.program.push_back(nullptr);
  return options;
}

uint32_t action_named(const std::string& name, int errno_value)
{
  if (name == "SCMP_ACT_ERRNO")
    return SCMP_ACT_ERRNO(static_cast<uint16_t>(errno_value));
  if (name == "SCMP_ACT_KILL_PROCESS")
    return SCMP_ACT_KILL_PROCESS;
  if (name == "SCMP_ACT_KILL" || name == "SCMP_ACT_KILL_THREAD")
    return SCMP_ACT_KILL_THREAD;
  if (name == "SCMP_ACT_TRAP")
    return SCMP_ACT_TRAP;
  if (name == "SCMP_ACT_LOG")
    return SCMP_ACT_LOG;
  fail("unsupported default action " + name);
}

Profile read_profile(const std::string& path)
{
  std::ifstream in(path);
  if (!in)
    fail("cannot read " + path + ": " + std::strerror(errno));
  nlohmann::json json = nlohmann::json::parse(in, nullptr, false);
  if (json.is_discarded() || !json.is_object())
    fail(path + " is not a JSON object");
  Profile profile;
  try {
    profile.default_action = action_named(json.at("defaultAction").get<std::string>(),
                                          json.value("defaultErrnoRet", EPERM));
    for (const auto& name : json.value("architectures", nlohmann::json::array())) {
      // SCMP_ARCH_X86_64 is libseccomp's x86_64, SCMP_ARCH_AARCH64 its aarch64.
      std::string token = name.get<std::string>();
      if (!token.starts_with("SCMP_ARCH_"))
        fail(path + ": unknown architecture " + token);
      token.erase(0, std::strlen("SCMP_ARCH_"));
      for (char& c : token)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      uint32_t architecture = seccomp_arch_resolve_name(token.c_str());
      if (architecture == 0)
        fail(path + ": unknown architecture " + name.get<std::string>());
      profile.architectures.push_back(architecture);
    }
    for (const auto& rule : json.at("syscalls")) {
      if (rule.at("action") != "SCMP_ACT_ALLOW" || rule.contains("args"))
        fail(path + ": only rules that allow calls by name are supported");
      for (const auto& name : rule.at("names"))
        profile.allowed.push_back(name.get<std::string>());
    }
  } catch (const nlohmann::json::exception& e) {
    fail(path + ": " + e.what());
  }
  return profile;
}

bool holds_cap_sys_admin()
{
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3]{};
  if (::syscall(SYS_capget, &header, data) != 0)
    return false;
  return (data[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective & CAP_TO_MASK(CAP_SYS_ADMIN)) != 0;
}

scmp_filter_ctx build_filter(const Options& options, const Profile& profile, uint32_t action)
{
  scmp_filter_ctx filter = seccomp_init(action);
  if (filter == nullptr)
    fail("cannot make a seccomp filter");
  for (uint32_t architecture : profile.architectures) {
    int rc = seccomp_arch_add(filter, architecture);
    if (rc != 0 && rc != -EEXIST)
      fail("cannot add an architecture of " + options.profile + ": " + std::strerror(-rc));
  }
  for (const auto& name : profile.allowed) {
    int number = seccomp_syscall_resolve_name(name.c_str());
    if (number == __NR_SCMP_ERROR)
      fail(options.profile + " names " + name + ", which libseccomp does not know");
    // Added for every architecture of the filter where the call exists, skipped on the others.
    if (int rc = seccomp_rule_add(filter, SCMP_ACT_ALLOW, number, 0); rc != 0)
      fail("cannot allow " + name + ": " + std::strerror(-rc));
  }
  seccomp_attr_set(filter, SCMP_FLTATR_CTL_NNP, holds_cap_sys_admin() ? 0 : 1);
  // A binary tree of the calls rather than a list: a call costs a few comparisons.
  seccomp_attr_set(filter, SCMP_FLTATR_CTL_OPTIMIZE, 2);
  return filter;
}

const char* architecture_name(uint32_t architecture)
{
  switch (architecture) {
  case SCMP_ARCH_X86_64:
    return "x86_64";
  case SCMP_ARCH_AARCH64:
    return "aarch64";
  case SCMP_ARCH_X86:
    return "x86";
  case SCMP_ARCH_X32:
    return "x32";
  default:
    return "another architecture";
  }
}

std::string read_small(const std::string& path)
{
  std::ifstream in(path, std::ios::binary);
  std::string text(512, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0'))
    text.pop_back();
  for (char& c : text)
    c = c == '\0' ? ' ' : c;
  return text;
}

void report(const Options& options, const std::string& line)
{
  std::fputs(line.c_str(), stderr);
  if (options.report.empty())
    return;
  int fd = ::open(options.report.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return;
  [[maybe_unused]] ssize_t written = ::write(fd, line.data(), line.size());
  ::close(fd);
}

// Closes every descriptor but those kept: the caller's pipes close when the program closes them.
void close_all_but(const std::set<int>& kept)
{
  std::vector<int> open_fds;
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    while (const dirent* entry = ::readdir(dir)) {
      if (std::isdigit(static_cast<unsigned char>(entry->d_name[0])))
        open_fds.push_back(std::atoi(entry->d_name));
    }
    ::closedir(dir);
  }
  for (int fd : open_fds) {
    if (!kept.contains(fd))
      ::close(fd);
  }
}

// Answers the filter's notifications until the program ends. program is the launcher's pid,
// which the program keeps; listener is where the launcher puts the listener's descriptor.
[[noreturn]] void supervise(const Options& options, pid_t program, std::atomic<int>* listener_slot)
{
  ::prctl(PR_SET_NAME, "seccomp-watch");
  // Signals sent to the program's process group (a terminal hanging up, a test's ^C) are not for
  // the supervisor: without it, the calls it should name would fail with ENOSYS, unnamed.
  for (int signal_number : {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU})
    std::signal(signal_number, SIG_IGN);
  int program_fd = static_cast<int>(::syscall(SYS_pidfd_open, program, 0));
  if (program_fd < 0) {
    std::fprintf(stderr, "seccomp_launcher: cannot watch pid %d: %s\n", program,
                 std::strerror(errno));
    ::kill(program, SIGKILL);
    ::_exit(1);
  }
  auto program_ended = [&](int timeout_ms) {
    pollfd ended{program_fd, POLLIN, 0};
    return ::poll(&ended, 1, timeout_ms) > 0;
  };
  int listener = -1;
  while ((listener = listener_slot->load(std::memory_order_acquire)) < 0) {
    if (program_ended(1)) // it could not load the filter, and said so
      ::_exit(0);
  }
  // A table of its own, in which the listener stays once the program's exec closes its copy.
  if (::unshare(CLONE_FILES) != 0)
    ::_exit(1);
  close_all_but({STDERR_FILENO, listener, program_fd});

  std::string name = options.program[0];
  name = name.substr(name.rfind('/') + 1);
  seccomp_notif* request = nullptr;
  seccomp_notif_resp* response = nullptr;
  // The kernel takes a request only if it is all zeros, in the size it says (libseccomp clears
  // none).
  seccomp_notif_sizes sizes{};
  if (seccomp_notify_alloc(&request, &response) != 0 ||
      ::syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) != 0)
    ::_exit(1);
  std::set<std::pair<uint32_t, int>> named;
  bool killed = false;
  for (;;) {
    pollfd ready[2] = {{listener, POLLIN, 0}, {program_fd, POLLIN, 0}};
    if (::poll(ready, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      ::_exit(1);
    }
    if (ready[1].revents != 0 || (ready[0].revents & (POLLHUP | POLLERR)) != 0)
      ::_exit(0);
    std::memset(request, 0, sizes.seccomp_notif);
    if (int rc = seccomp_notify_receive(listener, request); rc != 0) {
      if (rc == -ENOENT || errno == ENOENT || errno == EINTR)
        continue; // the caller died meanwhile
      std::fprintf(stderr, "seccomp_launcher: cannot receive a notification: %s\n",
                   std::strerror(errno));
      ::kill(program, SIGKILL);
      ::_exit(1);
    }
    response->id = request->id;
    response->val = 0;
    response->error = -EPERM;
    response->flags = 0;
    auto call = std::make_pair(request->data.arch, request->data.nr);
    if (!killed && named.insert(call).second) {
      char* call_name = seccomp_syscall_resolve_num_arch(call.first, call.second);
      std::string thread = std::to_string(request->pid);
      std::string line =
          "seccomp_launcher: " + name + " (pid " + std::to_string(program) + ", thread " + thread +
          " " + read_small("/proc/" + thread + "/comm") + ") called " +
          (call_name ? call_name : "?") + ", system call " + std::to_string(call.second) + " on " +
          architecture_name(call.first) + ", which " + options.profile + " does not allow; " +
          (options.mode == Mode::learn
               ? std::string("let through (learn mode)")
               : std::string("killed it, so that its test fails here (allow a call with "
                             "scripts/seccomp-profile; FLAMEBPF_SECCOMP=learn names every "
                             "missing call of a run)")) +
          "; command: " + read_small("/proc/" + std::to_string(program) + "/cmdline") + "\n";
      std::free(call_name);
      report(options, line);
    }
    if (options.mode == Mode::learn) {
      response->error = 0;
      response->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    } else if (!killed) {
      killed = true;
      ::kill(program, SIGKILL);
      // A child the program forked (to connect to a JVM as its user) is a process of its own.
      ::kill(static_cast<pid_t>(request->pid), SIGKILL);
    }
    seccomp_notify_respond(listener, response);
  }
}

} // namespace

int main(int argc, char** argv)
{
  Options options = parse_options(argc, argv);
  if (options.mode == Mode::off) {
    ::execv(options.program[0], options.program.data());
    std::fprintf(stderr, "seccomp_launcher: cannot run %s: %s\n", options.program[0],
                 std::strerror(errno));
    return kCannotRun;
  }
  Profile profile = read_profile(options.profile);
  bool supervised = options.mode == Mode::enforce || options.mode == Mode::learn;
  scmp_filter_ctx filter =
      build_filter(options, profile, supervised ? SCMP_ACT_NOTIFY : profile.default_action);

  std::atomic<int>* listener_slot = nullptr;
  if (supervised) {
    void* shared = ::mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE,
                          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED)
      fail(std::string("cannot map a shared page: ") + std::strerror(errno));
    listener_slot = new (shared) std::atomic<int>(-1);
    pid_t program = ::getpid();
    // fork(), but sharing the descriptor table, where the listener will appear.
    long child = ::syscall(SYS_clone, CLONE_FILES | SIGCHLD, 0, nullptr, nullptr, 0);
    if (child < 0)
      fail(std::string("cannot start the supervisor: ") + std::strerror(errno));
    if (child == 0)
      supervise(options, program, listener_slot);
  }
  if (int rc = seccomp_load(filter); rc != 0)
    fail("cannot load the filter of " + options.profile + ": " + std::strerror(-rc));
  // From here on, only the calls the profile allows, and the exec.
  if (listener_slot != nullptr)
    listener_slot->store(seccomp_notify_fd(filter), std::memory_order_release);
  ::execv(options.program[0], options.program.data());
  int error_number = errno;
  std::fprintf(stderr, "seccomp_launcher: cannot run %s: %s\n", options.program[0],
               std::strerror(error_number));
  return kCannotRun;
}
