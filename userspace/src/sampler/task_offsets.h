// Where the sampling program finds task_struct's fields on the running kernel. It reads them with
// bpf_probe_read_kernel at offsets given before load instead of CO-RE relocations: libbpf would
// parse the whole kernel BTF for those (a dozen milliseconds before the first sample), while one
// scan of its type section for one struct takes a millisecond or two.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace flamebpf::sampler {

struct TaskOffsets {
  uint32_t mm = 0;           // task_struct.mm: NULL for kernel threads, new at every exec
  uint32_t group_leader = 0; // task_struct.group_leader: the process's first thread
  uint32_t comm = 0;         // task_struct.comm: the thread's name
};

// Scans raw BTF (the format of /sys/kernel/btf/vmlinux) for struct task_struct and the byte
// offsets of the members above, looking through anonymous struct and union members.
[[nodiscard]] Result<TaskOffsets> scan_task_offsets(std::string_view btf);

// The offsets on this kernel, from path: by scan_task_offsets, or through libbpf where the scan
// meets BTF it does not know (a newer type kind, say).
[[nodiscard]] Result<TaskOffsets>
load_task_offsets(const std::string& path = "/sys/kernel/btf/vmlinux");

} // namespace flamebpf::sampler
