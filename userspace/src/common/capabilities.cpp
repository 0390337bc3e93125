#include "common/capabilities.h"

#include <cerrno>
#include <cstdint>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace flamebpf::caps {

bool effective(Capability capability)
{
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (::syscall(SYS_capget, &header, data) != 0)
    return false;
  int bit = static_cast<int>(capability);
  return (data[bit / 32].effective & (1u << (bit % 32))) != 0;
}

std::string_view name(Capability capability)
{
  switch (capability) {
  case kChown:
    return "CAP_CHOWN";
  case kKill:
    return "CAP_KILL";
  case kSetgid:
    return "CAP_SETGID";
  case kSetuid:
    return "CAP_SETUID";
  case kSysPtrace:
    return "CAP_SYS_PTRACE";
  case kSysAdmin:
    return "CAP_SYS_ADMIN";
  case kSyslog:
    return "CAP_SYSLOG";
  case kPerfmon:
    return "CAP_PERFMON";
  case kBpf:
    return "CAP_BPF";
  }
  return "a capability";
}

std::string hint(int errno_value, Capability capability)
{
  if (errno_value != EPERM || effective(capability))
    return "";
  return "; flamebpf lacks " + std::string(name(capability));
}

std::string setid_hint()
{
  for (Capability needed : {kSetuid, kSetgid})
    if (!effective(needed))
      return "; flamebpf lacks " + std::string(name(needed));
  return "";
}

bool drop_all_in_this_thread()
{
  // The raw system call changes this thread alone (glibc has no wrapper that would broadcast).
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct none[2]{};
  return ::syscall(SYS_capset, &header, none) == 0;
}

} // namespace flamebpf::caps
