// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// Names kernel addresses for the symbolizer (without reading /proc/kallsyms, which may show only
// zeros): userspace fills `batch`, runs this program with BPF_PROG_TEST_RUN and reads the names
// back.
#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bpf_abi.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __type(key, __u32);
  __type(value, struct fb_kernel_names);
  __uint(max_entries, 1);
} batch SEC(".maps");

// %ps: the symbol without offset, with " [module]" for a module's code; bpf_snprintf takes its
// format from read-only data.
static const char name_format[] = "%ps";

SEC("syscall")
int name_kernel_addresses(void* ctx)
{
  __u32 zero = 0;
  struct fb_kernel_names* names = bpf_map_lookup_elem(&batch, &zero);
  if (!names)
    return 0;
  __u32 count = names->count;
  for (__u32 i = 0; i < FB_KERNEL_NAMES_BATCH; i++) {
    if (i >= count)
      break;
    bpf_snprintf(names->names[i], FB_KERNEL_NAME_LEN, name_format, &names->addresses[i],
                 sizeof(__u64));
  }
  return 0;
}
