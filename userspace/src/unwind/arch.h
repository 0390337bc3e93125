// The architecture unwind tables are built for: the one flamebpf is built for.
#pragma once

#if defined(__x86_64__)
#include "unwind/arch_x86_64.h"
#else
#error                                                                                             \
    "flamebpf unwinds x86-64 only: another architecture needs unwind/arch_<name>.h and bpf/arch_<name>.bpf.h"
#endif
