// Starting programs from the tests: one way for every harness, with the child's standard
// streams, environment, cgroup, session and descriptor limit chosen by the caller.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

#include "common/unique_fd.h"

namespace flamebpf::testing {

// How spawn() starts a program.
struct SpawnOptions {
  // The whole environment ("NAME=value"); nullopt passes on the test's own.
  std::optional<std::vector<std::string>> environment;
  // Descriptors that become stdin, stdout and stderr; -1 is /dev/null.
  int input = -1;
  int output = -1;
  int error_output = -1;
  // A cgroup2 directory the child moves itself into before exec; empty leaves it in ours.
  std::string cgroup;
  // A session of its own and no controlling terminal, as a service manager starts a daemon.
  bool new_session = false;
  // A soft limit on open descriptors (RLIMIT_NOFILE), if set.
  std::optional<size_t> max_open_files;
  // Closes every descriptor above the standard streams, close-on-exec or not.
  bool close_other_descriptors = false;
};

// Starts argv[0] (a path, not looked up on PATH) with argv. Signals start at their defaults,
// unblocked, whatever the test framework set. Throws std::runtime_error if it cannot fork; a child
// that cannot move into its cgroup exits with 126, one that cannot exec with 127.
pid_t spawn(const std::vector<std::string>& argv, const SpawnOptions& options = {});

// The exit code of a wait status, or 128 + the signal that killed the process.
int exit_code(int status);

// Waits up to timeout for a child of ours: its exit code (as exit_code()), -1 if it is not our
// child, or nullopt if it still runs.
std::optional<int> wait_child(pid_t pid, std::chrono::steady_clock::duration timeout);

// Both ends of a pipe, close-on-exec, so that a child gets only the end it is given as a
// standard stream.
struct Pipe {
  UniqueFd read_end;
  UniqueFd write_end;
};
Pipe make_pipe();

// A file opened for appending (created 0644 if missing), to take a child's output.
UniqueFd open_output_file(const std::string& path);

// What run_process() collected.
struct ProcessOutput {
  int status = -1; // exit code, 128 + signal, or -1 if it timed out and was killed
  std::string out;
  std::string err;
};

// Runs argv to completion, collecting stdout and stderr apart (options' output and error_output
// are ignored); kills it after timeout.
ProcessOutput run_process(const std::vector<std::string>& argv,
                          SpawnOptions options,
                          std::chrono::steady_clock::duration timeout);

} // namespace flamebpf::testing
