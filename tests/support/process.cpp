#include "process.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <stdexcept>
#include <sys/resource.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace flamebpf::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string system_message(const std::string& what)
{
  return what + ": " + std::strerror(errno);
}

// The child's side of spawn(): only async-signal-safe calls, since the test may run threads.
[[noreturn]] void become(char* const* argv,
                         char* const* environment,
                         const SpawnOptions& options,
                         const std::string& cgroup_procs)
{
  if (!cgroup_procs.empty()) {
    // "0" names the writing process itself.
    int fd = ::open(cgroup_procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 || ::write(fd, "0", 1) < 0)
      ::_exit(126);
    ::close(fd);
  }
  if (options.new_session)
    ::setsid();
  if (options.max_open_files) {
    rlimit files{};
    ::getrlimit(RLIMIT_NOFILE, &files);
    files.rlim_cur = std::min<rlim_t>(files.rlim_max, *options.max_open_files);
    ::setrlimit(RLIMIT_NOFILE, &files);
  }
  // Ignored signals stay ignored across exec; children start with the defaults.
  struct sigaction defaults {};
  defaults.sa_handler = SIG_DFL;
  for (int signal_number : {SIGPIPE, SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGCHLD})
    ::sigaction(signal_number, &defaults, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);

  const std::array<int, 3> sources{options.input, options.output, options.error_output};
  // Moved above the standard streams first, so that dup2 onto 0-2 never overwrites a source.
  std::array<int, 3> moved{-1, -1, -1};
  for (int target = 0; target < 3; ++target) {
    moved[target] = sources[target] >= 0 ? ::fcntl(sources[target], F_DUPFD, 3)
                                         : ::open("/dev/null", target == 0 ? O_RDONLY : O_WRONLY);
    if (moved[target] < 0)
      ::_exit(126);
  }
  for (int target = 0; target < 3; ++target) {
    if (::dup2(moved[target], target) < 0)
      ::_exit(126);
  }
  for (int fd : moved) {
    if (fd > 2)
      ::close(fd);
  }
  if (options.close_other_descriptors)
    ::close_range(3, ~0U, 0);
  ::execve(argv[0], argv, environment);
  ::_exit(127);
}

} // namespace

pid_t spawn(const std::vector<std::string>& argv, const SpawnOptions& options)
{
  if (argv.empty())
    throw std::invalid_argument("spawn: no program");
  // Everything the child needs is made before fork.
  std::vector<char*> args;
  for (const auto& arg : argv)
    args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> inherited;
  if (!options.environment) {
    for (char** entry = environ; *entry != nullptr; ++entry)
      inherited.emplace_back(*entry);
  }
  const auto& variables = options.environment ? *options.environment : inherited;
  std::vector<char*> environment;
  for (const auto& variable : variables)
    environment.push_back(const_cast<char*>(variable.c_str()));
  environment.push_back(nullptr);
  std::string cgroup_procs = options.cgroup.empty() ? "" : options.cgroup + "/cgroup.procs";

  pid_t pid = ::fork();
  if (pid < 0)
    throw std::runtime_error(system_message("cannot start " + argv[0] + ": fork"));
  if (pid == 0)
    become(args.data(), environment.data(), options, cgroup_procs);
  return pid;
}

int exit_code(int status)
{
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::optional<int> wait_child(pid_t pid, Clock::duration timeout)
{
  auto deadline = Clock::now() + timeout;
  for (;;) {
    int status = 0;
    pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid)
      return exit_code(status);
    if (done < 0 && errno != EINTR)
      return -1;
    if (Clock::now() >= deadline)
      return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

Pipe make_pipe()
{
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw std::runtime_error(system_message("pipe2"));
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

UniqueFd open_output_file(const std::string& path)
{
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error(system_message("cannot open " + path));
  return UniqueFd(fd);
}

ProcessOutput
run_process(const std::vector<std::string>& argv, SpawnOptions options, Clock::duration timeout)
{
  Pipe out = make_pipe();
  Pipe err = make_pipe();
  options.output = out.write_end.get();
  options.error_output = err.write_end.get();
  pid_t pid = spawn(argv, options);
  out.write_end.reset(); // so that reads end when the child exits
  err.write_end.reset();

  ProcessOutput result;
  std::array<pollfd, 2> fds{{{out.read_end.get(), POLLIN, 0}, {err.read_end.get(), POLLIN, 0}}};
  std::array<std::string*, 2> sinks{&result.out, &result.err};
  auto deadline = Clock::now() + timeout;
  bool timed_out = false;
  for (int open_streams = 2; open_streams > 0;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    int ready =
        ::poll(fds.data(), fds.size(), static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR)
      break;
    for (size_t i = 0; ready > 0 && i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0)
        continue;
      char buffer[4096];
      ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        fds[i].fd = -1; // poll skips negative descriptors
        --open_streams;
      }
    }
  }
  if (timed_out)
    ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.status = timed_out ? -1 : exit_code(status);
  return result;
}

} // namespace flamebpf::testing
