#include "sampler/features.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <iterator>
#include <string>
#include <unistd.h>

#include "common/capabilities.h"
#include "common/log.h"
#include "common/unique_fd.h"

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
  // Linux 5.9 and later open /proc/<pid>/map_files with CAP_CHECKPOINT_RESTORE too.
  if (!admin && !effective(kCheckpointRestore))
    spdlog::warn("missing CAP_SYS_ADMIN (or CAP_CHECKPOINT_RESTORE): deleted binaries and "
                 "binaries found only in a container's mount namespace stay unnamed "
                 "(/proc/<pid>/map_files)");
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

bool hash_maps_allocate_on_demand()
{
  LIBBPF_OPTS(bpf_map_create_opts, map_options, .map_flags = BPF_F_NO_PREALLOC);
  UniqueFd map(bpf_map_create(BPF_MAP_TYPE_HASH, "fb_probe", sizeof(uint32_t), sizeof(uint64_t), 1,
                              &map_options));
  if (!map.valid())
    return false;
  // A perf_event program that looks a key up in that map; kernels that allow only preallocated
  // hash maps there refuse to load it.
  const bpf_insn program[] = {
      {.code = BPF_ST | BPF_MEM | BPF_W, .dst_reg = BPF_REG_10, .off = -4, .imm = 0},
      {.code = BPF_LD | BPF_DW | BPF_IMM,
       .dst_reg = BPF_REG_1,
       .src_reg = BPF_PSEUDO_MAP_FD,
       .imm = map.get()},
      {},
      {.code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = BPF_REG_2, .src_reg = BPF_REG_10},
      {.code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = BPF_REG_2, .imm = -4},
      {.code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_map_lookup_elem},
      {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
      {.code = BPF_JMP | BPF_EXIT},
  };
  UniqueFd loaded(bpf_prog_load(BPF_PROG_TYPE_PERF_EVENT, "fb_probe", "GPL", program,
                                std::size(program), nullptr));
  return loaded.valid();
}

} // namespace flamebpf::sampler
