#include "sampler/features.h"

#include <bpf/libbpf.h>
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

Result<> check_unwinder_support()
{
  struct Helper {
    bpf_func_id id;
    const char* name;
  };
  for (Helper helper :
       {Helper{BPF_FUNC_loop, "bpf_loop"}, Helper{BPF_FUNC_task_pt_regs, "bpf_task_pt_regs"},
        Helper{BPF_FUNC_get_current_task_btf, "bpf_get_current_task_btf"}}) {
    int supported = libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, helper.id, nullptr);
    if (supported < 0)
      return fail(system_error(-supported, std::string("cannot probe for ") + helper.name));
    if (supported == 0)
      return fail(
          error(std::string("this kernel's perf_event programs cannot call ") + helper.name));
  }
  return {};
}

} // namespace flamebpf::sampler
