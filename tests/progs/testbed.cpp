// flamebpf-testbed: real containers to try flamebpf on, from the container tests' harness (a
// private dockerd, images built locally, nothing left behind even after a crash). Run as root:
//
//   flamebpf-testbed jvm-demo [--seconds S] [--burners N] -- COMMAND...
//
// starts a private dockerd, builds the JDK 17 image, runs the container flamebpf-demo with
// `java -XX:+PreserveFramePointer -cp /app Burner <S+30>` (and with --burners, N more containers
// flamebpf-burner-<i> each running the native burner workload), waits for "burner ready", then runs
// COMMAND with every {container} in its arguments replaced by the container's name and every
// {pid} by the JVM's host pid. When COMMAND ends it prints COMMAND's exit code, removes the
// container, the image and the daemon, and exits with that code. Ctrl-C, SIGTERM and SIGHUP are
// passed on to COMMAND (it runs in a process group of its own) and end the demo after it, with the
// same teardown.
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <spawn.h>
#include <stdexcept>
#include <string>
#include <string_view>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "container_harness.h"

extern char** environ;

namespace {

using flamebpf::testing::DockerDaemon;
using flamebpf::testing::JavaVersion;

constexpr const char* kContainerName = "flamebpf-demo";
constexpr int kDefaultSeconds = 30;
// The JVM outlives COMMAND by this much, so COMMAND never sees it end.
constexpr int kExtraSeconds = 30;

volatile std::sig_atomic_t g_signal = 0;

void on_signal(int signal_number)
{
  g_signal = signal_number;
}

// Thrown to unwind, and so tear down, when a signal arrives before COMMAND runs.
struct Interrupted {};

void check_signal()
{
  if (g_signal != 0)
    throw Interrupted{};
}

void say(const std::string& message)
{
  std::fprintf(stderr, "flamebpf-testbed: %s\n", message.c_str());
}

int usage()
{
  std::fprintf(stderr,
               "usage: flamebpf-testbed jvm-demo [--seconds S] [--burners N] -- COMMAND...\n"
               "  {container} in COMMAND becomes the container's name, {pid} the JVM's "
               "host pid\n");
  return 2;
}

std::string replace_all(std::string text, std::string_view from, const std::string& to)
{
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// Starts argv (searched on PATH) in a process group of its own, with default signal handling.
pid_t start_command(const std::vector<std::string>& argv)
{
  posix_spawnattr_t attributes;
  ::posix_spawnattr_init(&attributes);
  sigset_t defaults;
  sigset_t empty;
  sigemptyset(&defaults);
  sigemptyset(&empty);
  for (int signal_number : {SIGINT, SIGTERM, SIGHUP, SIGPIPE})
    sigaddset(&defaults, signal_number);
  ::posix_spawnattr_setsigdefault(&attributes, &defaults);
  ::posix_spawnattr_setsigmask(&attributes, &empty);
  ::posix_spawnattr_setpgroup(&attributes, 0);
  ::posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK |
                                              POSIX_SPAWN_SETPGROUP);
  std::vector<char*> args;
  for (const auto& arg : argv)
    args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, args[0], nullptr, &attributes, args.data(), environ);
  ::posix_spawnattr_destroy(&attributes);
  if (rc != 0)
    throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
  return pid;
}

// Waits for the command, passing on the signals this process gets; its exit code, or 128 +
// the signal that ended it.
int wait_command(pid_t pid)
{
  int forwarded = 0;
  for (;;) {
    int status = 0;
    pid_t done = ::waitpid(pid, &status, 0);
    if (done == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (done < 0 && errno != EINTR)
      throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
    if (g_signal != 0 && g_signal != forwarded) {
      forwarded = g_signal;
      ::kill(-pid, forwarded);
    }
  }
}

int jvm_demo(int seconds, int burners, std::vector<std::string> command)
{
  say("starting a private dockerd");
  DockerDaemon daemon;
  check_signal();
  if (burners > 0) {
    std::string image = daemon.burner_image();
    for (int i = 0; i < burners; ++i) {
      std::string name = "flamebpf-burner-" + std::to_string(i + 1);
      // The image's burner copies have names of their own, so each container's comm differs.
      std::string program = std::string(flamebpf::testing::kBurnerNames[i % 4]);
      daemon.run(name, {}, image, {"/usr/bin/" + program, std::to_string(seconds + kExtraSeconds)});
      say("container " + name + " runs " + program);
      check_signal();
    }
  }
  say("building the JDK 17 image (jlink of the host JDK, Burner.class)");
  std::string image = daemon.java_image(JavaVersion::kJdk17);
  check_signal();
  auto container = daemon.run(kContainerName, {}, image,
                              {"java", "-XX:+PreserveFramePointer", "-cp", "/app", "Burner",
                               std::to_string(seconds + kExtraSeconds)});
  say("container " + container.name + " (" + container.id.substr(0, 12) + "): JVM host pid " +
      std::to_string(container.pid) + ", cgroup " + container.cgroup2_path);
  daemon.wait_for_output(kContainerName, "burner ready");
  check_signal();

  for (auto& arg : command) {
    arg = replace_all(arg, "{container}", container.name);
    arg = replace_all(arg, "{pid}", std::to_string(container.pid));
  }
  std::string line;
  for (const auto& arg : command)
    line += (line.empty() ? "" : " ") + arg;
  say("burner ready; running: " + line);
  int code = wait_command(start_command(command));
  say("command exited with code " + std::to_string(code) + "; tearing down");
  return code;
}

} // namespace

int main(int argc, char** argv)
{
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] != "jvm-demo")
    return usage();
  int seconds = kDefaultSeconds;
  int burners = 0;
  size_t i = 1;
  for (; i < args.size() && args[i] != "--"; ++i) {
    bool is_seconds = args[i] == "--seconds";
    if ((is_seconds || args[i] == "--burners") && i + 1 < args.size()) {
      char* end = nullptr;
      long value = std::strtol(args[++i].c_str(), &end, 10);
      if (*end != '\0' || value < 0 || value > 86400 || (is_seconds && value < 1) ||
          (!is_seconds && value > 4))
        return usage();
      (is_seconds ? seconds : burners) = static_cast<int>(value);
    } else {
      return usage();
    }
  }
  if (i + 1 >= args.size())
    return usage();
  std::vector<std::string> command(args.begin() + static_cast<long>(i) + 1, args.end());
  if (::geteuid() != 0) {
    say("needs root (it starts dockerd and containers): run it with sudo");
    return 1;
  }

  // No SA_RESTART: waits return early, so the flag is seen promptly.
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  for (int signal_number : {SIGINT, SIGTERM, SIGHUP})
    ::sigaction(signal_number, &action, nullptr);

  int code = 1;
  try {
    code = jvm_demo(seconds, burners, command);
  } catch (const Interrupted&) {
    code = 128 + g_signal;
  } catch (const std::exception& e) {
    say(std::string("error: ") + e.what());
    code = g_signal != 0 ? 128 + g_signal : 1;
  }
  // The daemon, its containers and its image are gone by now.
  say(g_signal != 0 ? "interrupted; everything is torn down" : "everything is torn down");
  if (g_signal != 0 && code == 128 + g_signal) {
    // Ended by the signal, so that a calling shell stops too.
    ::signal(g_signal, SIG_DFL);
    ::raise(g_signal);
  }
  return code;
}
