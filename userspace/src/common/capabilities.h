// This process's effective capabilities, to name the one missing when the kernel says EPERM.
#pragma once

#include <string>
#include <string_view>

namespace flamebpf::caps {

// Numbers from linux/capability.h.
enum Capability : int {
  kChown = 0,
  kKill = 5,
  kSetgid = 6,
  kSetuid = 7,
  kSysPtrace = 19,
  kSysAdmin = 21,
  kSyslog = 34,
  kPerfmon = 38,
  kBpf = 39,
};

// Whether capability is in this process's effective set (false if it cannot be read).
bool effective(Capability capability);

// "CAP_SYS_PTRACE" and the like.
std::string_view name(Capability capability);

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
