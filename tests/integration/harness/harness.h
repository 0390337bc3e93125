// Helpers for the integration tests: real cgroups, real processes, the real flamebpf binary.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <sys/types.h>
#include <vector>

#include "temp_dir.h"
#include "wait.h"

namespace flamebpf::testing {

// A fresh cgroup2 directory, removed (after killing what runs in it) on destruction.
class TempCgroup {
public:
  // A new directory under parent (an absolute cgroup2 path), or under the cgroup2 root if empty.
  explicit TempCgroup(const std::string& parent = "");
  ~TempCgroup();
  TempCgroup(const TempCgroup&) = delete;
  TempCgroup& operator=(const TempCgroup&) = delete;

  const std::string& path() const { return path_; }
  // The path relative to the cgroup2 mount, without the leading '/'.
  std::string relative_path() const;

private:
  std::string path_;
};

// Two fresh cgroup2 directories whose paths meet when made file names: <parent>/a and <parent>_a
// ('/' is spelled '_'). Both are removed (after killing what runs in them) on destruction.
class CgroupsMeetingAsFileNames {
public:
  CgroupsMeetingAsFileNames();
  ~CgroupsMeetingAsFileNames();
  CgroupsMeetingAsFileNames(const CgroupsMeetingAsFileNames&) = delete;
  CgroupsMeetingAsFileNames& operator=(const CgroupsMeetingAsFileNames&) = delete;

  const std::string& nested() const { return nested_; }
  const std::string& sibling() const { return sibling_; }

private:
  TempCgroup parent_;
  std::string nested_;
  std::string sibling_;
};

// The cgroup2 mount point, from /proc/self/mountinfo.
std::string cgroup2_mount();

// A running child process, killed and reaped on destruction unless waited for.
class Child {
public:
  // Starts argv (spawn()), first moving the child into cgroup (if not empty). stdout and stderr
  // go to output_file (if not empty), else /dev/null; stdin is /dev/null.
  Child(const std::vector<std::string>& argv,
        const std::string& cgroup = "",
        const std::string& output_file = "");
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  // Waits for exit; returns the exit code, or 128 + signal.
  int wait();
  void signal(int signal_number);

private:
  pid_t pid_ = -1;
};

// Copies the burner workload to dir/name, so that its comm (process name) is `name`.
std::string copy_burner(const std::string& dir, const std::string& name);

struct RunResult {
  int exit_code = -1;
  std::string output; // stdout and stderr
};

// Runs flamebpf with args to completion.
RunResult run_flamebpf(const std::vector<std::string>& args);

// Folded file lines: stack -> count.
std::map<std::string, uint64_t> read_folded(const std::string& path);

// The stacks of one target's folded dumps (agent mode: the target's directory), past its first
// skipped windows, which hold the recording's start.
std::map<std::string, uint64_t> read_dumps_after(const std::string& target, size_t skipped);

// Sum of counts of lines whose stack starts with prefix.
uint64_t count_with_prefix(const std::map<std::string, uint64_t>& folded,
                           const std::string& prefix);
// Sum of counts of lines whose stack contains text.
uint64_t count_containing(const std::map<std::string, uint64_t>& folded, const std::string& text);
uint64_t total_count(const std::map<std::string, uint64_t>& folded);

// The how_many stacks with the most samples, one per line, for failure messages.
std::string hottest_stacks(const std::map<std::string, uint64_t>& folded, size_t how_many = 8);

// The samples of the burner's late thread (burner --late-thread), and those of them whose stack
// reaches glibc's start_thread right above the thread's function: a local function of glibc
// that only its debug file names.
struct LateThreadRoots {
  uint64_t thread = 0;
  uint64_t start_thread = 0;
};
LateThreadRoots late_thread_roots(const std::map<std::string, uint64_t>& folded);

// The call chain of the burner workload (tests/progs/burner.c), root to leaf.
inline constexpr const char* kBurnerChain = "main;run;a;b;c";

// The samples of process comm in folded, checking (as a test expectation) that at least 80% of
// them end in the burner's call chain, fully named; context goes into the failure message.
uint64_t burner_chain_samples(const std::map<std::string, uint64_t>& folded,
                              const std::string& comm,
                              const std::string& context);

// User plus system CPU time of a process so far, in seconds.
double cpu_seconds(pid_t pid);

// Waits for the process to exit and returns its CPU time, read before it is reaped.
double cpu_seconds_at_exit(Child& child);

// Waits until process pid runs the program named comm (as /proc/<pid>/comm shows it): it has
// started that program. Fails the test after 10 s.
void wait_until_started(pid_t pid, const std::string& comm);

// Waits until process pid runs the program named comm (as /proc/<pid>/comm shows it) and has run
// on a CPU since it started that program: a workload that spins has reached its loop. Fails the
// test after 10 s.
void wait_until_busy(pid_t pid, const std::string& comm);

// Waits until flamebpf, started as process pid, has opened its perf events: it has resolved its
// targets and is about to sample. Fails the test after 30 s.
void wait_until_sampling(pid_t pid);

// Waits up to timeout_seconds for path to contain text.
bool wait_for_text(const std::string& path, const std::string& text, double timeout_seconds);

// The whole file, or "" if unreadable.
std::string read_text(const std::string& path);

// The lines of text containing needle.
std::vector<std::string> lines_with(const std::string& text, const std::string& needle);

} // namespace flamebpf::testing
