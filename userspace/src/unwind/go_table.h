// A Go binary's unwind rows from its pclntab (runtimes/go/pclntab.h): Go's compiler records, for
// every pc of every function, how far the stack pointer is below the one the function was entered
// with (its pcsp table), which unwinds each frame exactly, frameless leaves included, with no CFI
// and whatever the frame pointer holds. Merged with the file's CFI, which keeps the code its FDEs
// describe (a cgo binary's C code); Go's rows fill the rest of Go's text.
//
// Rows cost map memory (8 bytes each, within --unwind-memory), and four in five Go functions keep
// a frame pointer: while rbp points at their frame, the frame-pointer step finds their caller as
// their table would. A function whose first stack adjustment is Go's framing (read from its code
// there) gets a row for its entry up to that adjustment and one for its stack-growth tail, and
// the frame pointer in between: two rows, not one for each change of its stack pointer. Where rbp
// is not yet or no longer its frame's (the instruction or two after the adjustment; the return
// after rbp is restored), the frame-pointer step skips the function's caller: 1.5 to 2.2 % of a
// Go compiler's samples (bench/go-pclntab-last-run.txt). Every other function, frameless leaves
// first, keeps a row for each run of its table.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "common/elf_reader.h"
#include "runtimes/go/pclntab.h"
#include "unwind/unwind_table.h"

namespace flamebpf::unwind {

struct GoRows {
  // Rows by virtual address, sorted; each holds up to the next, the last up to end.
  std::vector<std::pair<uint64_t, fb_unwind_row>> rows;
  uint64_t end = 0;
  uint64_t functions = 0;
  // Functions whose frame-pointer setup was recognized: rows for their entry and tail only.
  uint64_t framed = 0;
  // Functions left to the frame pointer: their records or tables were malformed, their frames
  // too large for a row, or they switch stacks (Go's funcFlag_SPWRITE: asmcgocall, systemstack).
  uint64_t malformed = 0;
  uint64_t large_frames = 0;
  uint64_t stack_switches = 0;
};

// The rows of every function of table, whose code elf holds. The roots of Go's stacks
// (runtime.goexit and the others the table marks) end the unwinding.
GoRows go_rows(go::Pclntab& table, const ElfReader& elf);

// cfi's rows where they describe the code (any row but FB_UNWIND_FRAME_POINTER), go's elsewhere
// in [go's first row, go.end); nullopt if the result spans more than 4 GiB or holds more than
// max_rows.
std::optional<UnwindTable> merge_rows(const UnwindTable& cfi, const GoRows& go, size_t max_rows);

} // namespace flamebpf::unwind
