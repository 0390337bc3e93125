#include "common/capabilities.h"

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <future>
#include <linux/capability.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"

namespace flamebpf::caps {
namespace {

// linux/capability.h's names, by number.
constexpr std::array<const char*, 41> kNames = {
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
};

// What main() recorded before any thread existed; read-only once threads run.
struct Plan {
  bool recorded = false;
  CapabilitySet permitted;
  RunNeeds needs;
};
Plan g_plan;

// One warning for all failed drops: the first says what is at stake, the rest add nothing.
std::atomic<bool> g_drop_failure_said{false};

const char* role_name(Role role)
{
  switch (role) {
  case Role::kStarting:
    return "the start";
  case Role::kPipeline:
    return "the pipeline";
  case Role::kRuntimeAttacher:
    return "the runtimes' attacher";
  case Role::kScreen:
    return "top's screen";
  case Role::kNone:
    return "a fetching or serving thread";
  }
  return "a thread";
}

// Sets the calling thread's effective and permitted sets to keep and empties its inheritable
// set. The raw system call changes this thread alone (glibc has no wrapper that would broadcast).
bool set_this_thread(CapabilitySet keep)
{
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  for (int half = 0; half < 2; ++half) {
    auto bits = static_cast<uint32_t>(keep.mask() >> (32 * half));
    data[half].effective = bits;
    data[half].permitted = bits;
  }
  return ::syscall(SYS_capset, &header, data) == 0;
}

void say_drop_failed(const std::string& what, int errno_value)
{
  if (g_drop_failure_said.exchange(true))
    spdlog::debug("{}: {}", what, std::strerror(errno_value));
  else
    spdlog::warn("{}: {}", what, std::strerror(errno_value));
}

// Drops from the calling thread's bounding set every capability keep lacks; false (errno set) if
// the kernel refused one. Needs CAP_SETPCAP.
bool limit_bounding_set(CapabilitySet keep)
{
  for (int number = 0; number < 64; ++number) {
    int held = ::prctl(PR_CAPBSET_READ, number, 0, 0, 0);
    if (held < 0)
      break; // past the kernel's last capability
    if (held == 1 && !keep.contains(static_cast<Capability>(number)) &&
        ::prctl(PR_CAPBSET_DROP, number, 0, 0, 0) != 0)
      return false;
  }
  return true;
}

CapabilitySet bounding_set()
{
  uint64_t mask = 0;
  for (int number = 0; number < 64; ++number) {
    int held = ::prctl(PR_CAPBSET_READ, number, 0, 0, 0);
    if (held < 0)
      break;
    if (held == 1)
      mask |= uint64_t{1} << number;
  }
  return CapabilitySet::from_mask(mask);
}

} // namespace

std::string CapabilitySet::names() const
{
  std::string text;
  for (int number = 0; number < 64; ++number) {
    if ((mask_ & (uint64_t{1} << number)) == 0)
      continue;
    if (!text.empty())
      text += ' ';
    text += name(static_cast<Capability>(number));
  }
  return text.empty() ? "none" : text;
}

std::optional<ThreadSets> this_thread_sets()
{
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (::syscall(SYS_capget, &header, data) != 0)
    return std::nullopt;
  auto joined = [&](uint32_t __user_cap_data_struct::*field) {
    return CapabilitySet::from_mask(uint64_t{data[0].*field} | uint64_t{data[1].*field} << 32);
  };
  return ThreadSets{joined(&__user_cap_data_struct::effective),
                    joined(&__user_cap_data_struct::permitted),
                    joined(&__user_cap_data_struct::inheritable)};
}

CapabilitySet role_set(Role role, CapabilitySet permitted, const RunNeeds& needs)
{
  // Reading any process's files: its maps, root and memory (ptrace's read checks), and files of
  // any mode and owner in containers.
  constexpr CapabilitySet kReadProcesses{kSysPtrace, kDacReadSearch, kDacOverride};
  CapabilitySet wanted;
  switch (role) {
  case Role::kPipeline: {
    // BPF maps made as unwind tables grow, perf events for the cgroups of targets found later,
    // files mapped by processes (/proc/<pid>/map_files).
    constexpr CapabilitySet kSampling{kBpf, kPerfmon, kCheckpointRestore};
    wanted = kReadProcesses | kSampling;
    // CAP_SYS_ADMIN allows each of these: it stays for whichever the process was not given.
    if (!permitted.contains_all(kSampling))
      wanted = wanted | CapabilitySet{kSysAdmin};
    if (needs.chown_profiles)
      wanted = wanted | CapabilitySet{kChown};
    break;
  }
  case Role::kRuntimeAttacher:
    wanted = kReadProcesses;
    // Signalling a runtime's processes to attach (SIGQUIT), acting as their users and giving them
    // the agent's file.
    if (needs.attach_agents)
      wanted = wanted | CapabilitySet{kKill, kSetuid, kSetgid, kChown};
    break;
  case Role::kScreen:
    // A profile saved into the working directory, which is often the sudo user's.
    wanted = CapabilitySet{kDacOverride};
    if (needs.chown_saved_views)
      wanted = wanted | CapabilitySet{kChown};
    break;
  case Role::kStarting:
    // Besides what the threads keep: joining the host's namespaces and, without CAP_BPF or
    // CAP_PERFMON, sampling (CAP_SYS_ADMIN); reading /proc/kallsyms on kernels before 5.14
    // (CAP_SYSLOG); libbpf's raise of RLIMIT_MEMLOCK on kernels before 5.11 (CAP_SYS_RESOURCE);
    // --listen on a port below 1024.
    wanted = role_set(Role::kPipeline, permitted, needs) |
             role_set(Role::kRuntimeAttacher, permitted, needs) |
             role_set(Role::kScreen, permitted, needs) |
             CapabilitySet{kSysAdmin, kSyslog, kSysResource};
    if (needs.bind_privileged_port)
      wanted = wanted | CapabilitySet{kNetBindService};
    break;
  case Role::kNone:
    break;
  }
  return wanted & permitted;
}

bool limit_process(const RunNeeds& needs)
{
  auto sets = this_thread_sets();
  if (!sets) {
    say_drop_failed("cannot read flamebpf's capabilities; it keeps them all", errno);
    return false;
  }
  g_plan = {true, sets->permitted, needs};
  CapabilitySet keep = role_set(Role::kStarting, sets->permitted, needs);
  bool done = true;
  // Done first: it takes CAP_SETPCAP, which flamebpf does not keep.
  bool bounded = sets->effective.contains(kSetpcap);
  if (bounded && !limit_bounding_set(keep)) {
    say_drop_failed("cannot limit flamebpf's capability bounding set", errno);
    done = false;
  }
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) {
    say_drop_failed("cannot clear flamebpf's ambient capabilities", errno);
    done = false;
  }
  if (!set_this_thread(keep)) {
    int errno_value = errno;
    say_drop_failed("cannot limit flamebpf's capabilities to " + keep.names(), errno_value);
    return false;
  }
  spdlog::debug("capabilities: {} kept for the start, of {}; bounding set {}{}", keep.names(),
                sets->permitted.names(), bounding_set().names(),
                bounded ? "" : " (as given: narrowing it takes CAP_SETPCAP)");
  return done;
}

bool narrow_this_thread(Role role)
{
  auto sets = this_thread_sets();
  if (!sets) {
    say_drop_failed(std::string("cannot read the capabilities of ") + role_name(role), errno);
    return false;
  }
  CapabilitySet permitted = g_plan.recorded ? g_plan.permitted : sets->permitted;
  RunNeeds needs = g_plan.recorded ? g_plan.needs : RunNeeds{};
  CapabilitySet keep = role_set(role, permitted, needs) & sets->permitted;
  if (!set_this_thread(keep)) {
    int errno_value = errno;
    say_drop_failed(std::string("cannot narrow the capabilities of ") + role_name(role) + " to " +
                        keep.names() + "; it keeps " + sets->permitted.names(),
                    errno_value);
    return false;
  }
  spdlog::debug("capabilities of {} (thread {}): {}", role_name(role), ::gettid(), keep.names());
  return true;
}

std::thread start_thread(Role role, const char* name, std::function<void()> body)
{
  // The promise lives in the thread: set_value may still be inside it when the caller goes on.
  std::promise<void> narrowed;
  auto done = narrowed.get_future();
  std::thread thread(
      [role, name, narrowed = std::move(narrowed), body = std::move(body)]() mutable {
        ::pthread_setname_np(::pthread_self(), name);
        narrow_this_thread(role);
        narrowed.set_value();
        body();
      });
  done.wait();
  return thread;
}

bool effective(Capability capability)
{
  auto sets = this_thread_sets();
  return sets && sets->effective.contains(capability);
}

std::string name(Capability capability)
{
  auto number = static_cast<size_t>(capability);
  if (number < kNames.size())
    return kNames[number];
  return "capability " + std::to_string(number);
}

std::string hint(int errno_value, Capability capability)
{
  if (errno_value != EPERM || effective(capability))
    return "";
  return "; flamebpf lacks " + name(capability);
}

std::string setid_hint()
{
  for (Capability needed : {kSetuid, kSetgid})
    if (!effective(needed))
      return "; flamebpf lacks " + name(needed);
  return "";
}

bool drop_all_in_this_thread()
{
  return set_this_thread({});
}

} // namespace flamebpf::caps
