#include "sampler/features.h"

#include <cstdint>
#include <linux/capability.h>
#include <string>
#include <sys/syscall.h>
#include <unistd.h>

namespace flamebpf::sampler {
namespace {

constexpr int kCapSysAdmin = 21;
constexpr int kCapPerfmon = 38;
constexpr int kCapBpf = 39;

bool has_capability(const __user_cap_data_struct (&data)[2], int capability)
{
  return data[capability / 32].effective & (1u << (capability % 32));
}

} // namespace

Result<> check_privileges()
{
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &header, data) != 0)
    return fail(system_error(errno, "cannot read this process's capabilities"));
  if (has_capability(data, kCapSysAdmin))
    return {};
  bool bpf = has_capability(data, kCapBpf);
  bool perfmon = has_capability(data, kCapPerfmon);
  if (bpf && perfmon)
    return {};
  std::string missing = !bpf && !perfmon ? "CAP_BPF and CAP_PERFMON"
                        : !bpf           ? "CAP_BPF"
                                         : "CAP_PERFMON";
  return fail(error("missing " + missing +
                    ": flamebpf loads a BPF program and opens perf events; run it as root "
                    "(sudo) or grant CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN and CAP_SYS_PTRACE"));
}

Result<> check_kernel_btf(const char* path)
{
  if (access(path, R_OK) != 0) {
    auto failure = system_error(errno, std::string("kernel BTF ") + path + " is not readable");
    failure.message += "; flamebpf needs a kernel built with CONFIG_DEBUG_INFO_BTF=y";
    return fail(failure);
  }
  return {};
}

} // namespace flamebpf::sampler
