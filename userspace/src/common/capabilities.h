// flamebpf's capabilities: naming the one missing when the kernel says EPERM, and holding, from
// the end of the start on, only what each thread's work needs (docs/security.md, Capabilities).
//
// Capabilities are per thread: capset(2) changes the calling thread's sets, and a new thread
// starts with its creator's. So main() limits the process once, before any thread exists, to
// what the run may ever need; each thread then narrows itself to its role's set (a thread started
// after that inherits what its creator kept). A role's set is never more than what the thread
// holds: narrowing only ever drops.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

namespace flamebpf::caps {

// Numbers from linux/capability.h.
enum Capability : int {
  kChown = 0,
  kDacOverride = 1,
  kDacReadSearch = 2,
  kKill = 5,
  kSetgid = 6,
  kSetuid = 7,
  kSetpcap = 8,
  kNetBindService = 10,
  kSysPtrace = 19,
  kSysAdmin = 21,
  kSysResource = 24,
  kSyslog = 34,
  kPerfmon = 38,
  kBpf = 39,
  kCheckpointRestore = 40,
};

// A set of capabilities, as a bit mask of their numbers (the kernel's, and /proc's Cap* lines).
class CapabilitySet {
public:
  constexpr CapabilitySet() = default;
  constexpr CapabilitySet(std::initializer_list<Capability> capabilities)
  {
    for (Capability capability : capabilities)
      mask_ |= bit(capability);
  }
  static constexpr CapabilitySet from_mask(uint64_t mask)
  {
    CapabilitySet set;
    set.mask_ = mask;
    return set;
  }

  constexpr uint64_t mask() const { return mask_; }
  constexpr bool empty() const { return mask_ == 0; }
  constexpr bool contains(Capability capability) const { return (mask_ & bit(capability)) != 0; }
  // Whether every capability of other is in this set.
  constexpr bool contains_all(CapabilitySet other) const
  {
    return (mask_ & other.mask_) == other.mask_;
  }
  constexpr CapabilitySet operator|(CapabilitySet other) const
  {
    return from_mask(mask_ | other.mask_);
  }
  constexpr CapabilitySet operator&(CapabilitySet other) const
  {
    return from_mask(mask_ & other.mask_);
  }
  constexpr CapabilitySet without(CapabilitySet other) const
  {
    return from_mask(mask_ & ~other.mask_);
  }
  constexpr bool operator==(const CapabilitySet&) const = default;

  // "CAP_CHOWN CAP_BPF", by number; "none" if empty.
  std::string names() const;

private:
  static constexpr uint64_t bit(Capability capability)
  {
    return uint64_t{1} << static_cast<unsigned>(capability);
  }
  uint64_t mask_ = 0;
};

// The calling thread's sets; nullopt if the kernel does not say.
struct ThreadSets {
  CapabilitySet effective;
  CapabilitySet permitted;
  CapabilitySet inheritable;
};
std::optional<ThreadSets> this_thread_sets();

// What a thread of flamebpf does, and so which capabilities it holds once flamebpf has started.
enum class Role {
  // The pipeline's thread until the end of its start: everything the run may need (main() limits
  // the process to this).
  kStarting,
  // The pipeline's thread after its start, and the threads it starts from then on (the readers of
  // targets' files): sampling and reading any process's files.
  kPipeline,
  // The worker that loads flamebpf's agent into runtimes that take one (runtimes/), or with
  // --no-attach only reads them.
  kRuntimeAttacher,
  // top's screen, which saves the view's profile into the working directory.
  kScreen,
  // Threads that only talk to servers or clients: debuginfod's fetchers, the HTTP server's.
  kNone,
};

// What the run asks for beyond sampling, from its options.
struct RunNeeds {
  bool attach_agents = true; // --no-attach is not given
  // Profile files go to the user who ran sudo (chown): a recording's, which the pipeline's thread
  // writes, or the views top's screen saves.
  bool chown_profiles = false;
  bool chown_saved_views = false;
  bool bind_privileged_port = false; // --listen names a port below 1024
};

// The capabilities role holds after start, given those the process was permitted at its start
// and the run's needs: docs/security.md's table, intersected with permitted.
CapabilitySet role_set(Role role, CapabilitySet permitted, const RunNeeds& needs);

// Limits the whole process to role_set(kStarting): the bounding set (when CAP_SETPCAP allows),
// then the permitted and effective sets; the inheritable and ambient sets are emptied, so that no
// program flamebpf might start gets any. To be called by main() before any thread exists, since
// each thread has its own sets. Remembers the permitted set and needs for narrow_this_thread().
// Logs what was kept at debug level; warns once if a drop failed. False if one did.
bool limit_process(const RunNeeds& needs);

// Narrows the calling thread's permitted and effective sets to its role's (intersected with what
// it holds now) and empties its inheritable set. Without limit_process() (tests of a stage), the
// thread's present permitted set and default needs stand for the start's. Logs what was kept at
// debug level; warns once if the kernel refused. False if it did.
bool narrow_this_thread(Role role);

// Starts a thread named name (15 characters at most, as /proc/<pid>/task/<tid>/comm shows it)
// that narrows itself to role before it runs body, and returns once it has: the new thread never
// holds more than role's set while the caller goes on, and the threads it starts inherit no more.
std::thread start_thread(Role role, const char* name, std::function<void()> body);

// Whether capability is in the calling thread's effective set (false if it cannot be read).
bool effective(Capability capability);

// "CAP_SYS_PTRACE" and the like, for any number the kernel knows; "capability <n>" beyond.
std::string name(Capability capability);

// "; flamebpf lacks CAP_KILL" when errno_value is EPERM and capability is not effective, so that
// a permission error says what to grant; otherwise empty.
std::string hint(int errno_value, Capability capability);

// "; flamebpf lacks CAP_SETUID" (or CAP_SETGID) when acting as another user failed for want of
// the capability to do so; otherwise empty.
std::string setid_hint();

// Empties the calling thread's effective, permitted and inheritable sets, for good: a thread that
// only answers clients (the HTTP server's) needs none of root's capabilities, and a flaw in it
// then gains none. Capabilities are per thread: the others keep theirs. False if the kernel
// refused.
bool drop_all_in_this_thread();

} // namespace flamebpf::caps
