#include "sampler/features.h"

#include <string>
#include <unistd.h>

#include "common/capabilities.h"
#include "common/log.h"

namespace flamebpf::sampler {

Result<> check_privileges()
{
  using namespace caps;
  bool admin = effective(kSysAdmin);
  bool bpf = admin || effective(kBpf);
  bool perfmon = admin || effective(kPerfmon);
  if (!bpf || !perfmon) {
    std::string missing = !bpf && !perfmon ? "CAP_BPF and CAP_PERFMON"
                          : !bpf           ? "CAP_BPF"
                                           : "CAP_PERFMON";
    return fail(error("missing " + missing +
                      ": flamebpf loads a BPF program and opens perf events; run it as root "
                      "(sudo) or grant CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN and CAP_SYS_PTRACE"));
  }
  // Sampling works without these; naming what was sampled does not, so say it once up front.
  if (!effective(kSysPtrace))
    spdlog::warn("missing CAP_SYS_PTRACE: the code of other users' processes and of containers "
                 "stays unnamed (their /proc/<pid>/maps and roots are closed to flamebpf)");
  if (!admin)
    spdlog::warn("missing CAP_SYS_ADMIN: deleted binaries and binaries found only in a "
                 "container's mount namespace stay unnamed (/proc/<pid>/map_files)");
  return {};
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
