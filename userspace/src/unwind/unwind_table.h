// What the sampler's unwinder knows about one piece of code: the rows of bpf_abi.h, in the form
// the table builders (a file's CFI, a runtime's records of its JIT code) hand to the sampler that
// loads them.
#pragma once

#include <cstdint>
#include <vector>

#include "bpf_abi.h"

namespace flamebpf::unwind {

// Rows sorted by pc_offset, each holding up to the next; the last row is FB_UNWIND_FRAME_POINTER
// and ends the table. An address maps to base_address + pc_offset: for a file's table, the ELF
// virtual address (the sampler adds each mapping's load bias); for JIT code, the address itself.
struct UnwindTable {
  uint64_t base_address = 0;
  std::vector<fb_unwind_row> rows;
};

} // namespace flamebpf::unwind
