// Checks, made once before loading, that this kernel and this process can run the sampler.
#pragma once

#include "common/result.h"

namespace flamebpf::sampler {

// Fails with a one-line hint unless the process may load BPF and open perf events
// (root, CAP_SYS_ADMIN, or CAP_BPF with CAP_PERFMON).
[[nodiscard]] Result<> check_privileges();

// Fails unless the kernel exposes its BTF, which CO-RE relocation needs.
[[nodiscard]] Result<> check_kernel_btf(const char* path = "/sys/kernel/btf/vmlinux");

// Whether the sampling program may call what the table unwinder needs (bpf_loop, from 5.17;
// bpf_task_pt_regs, from 5.15; bpf_get_current_task_btf, from 5.11). Asked once per start; on
// failure, why, for the one log line that says the unwinder is off.
[[nodiscard]] Result<> check_unwinder_support();

// Whether this kernel's perf_event programs may use hash maps that allocate their entries as they
// are added (BPF_F_NO_PREALLOC), rather than all of them at creation. Asked once per start.
bool hash_maps_allocate_on_demand();

} // namespace flamebpf::sampler
