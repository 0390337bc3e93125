// A JVM's unwind table, built from its agent's records (jvm_records.h): one table per JVM, whose
// base is its lowest code address, covering its compiled methods, stubs and interpreter.
//   compiled code and stubs with a frame, prologue known:
//     before the frame is built        CFA = sp + 8
//     push form, after the push        CFA = sp + 16, rbp saved at CFA - 16
//     once the frame is built          FB_UNWIND_HOTSPOT_COMPILED: CFA = sp + frame_words * 8,
//                                      rbp saved at CFA - 16
//     (save form: after the sub, CFA = sp + frame_words * 8 with rbp not yet saved)
//   with a frame, prologue unknown     frame pointers until the frame is complete, then as built
//   no frame of its own, unknown code  frame pointers
//   the interpreter                    FB_UNWIND_HOTSPOT_INTERPRETER
// HotSpot's compiled code saves the caller's rbp in its frame even without
// -XX:+PreserveFramePointer, but uses rbp as a general register inside, so rbp is never a CFA
// base here. The epilogues (from add %rsp to ret, one per return) are not in the records: the
// unwinder tells them by their instructions where a sample stopped the code (hotspot.bpf.h).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "runtimes/hotspot/jvm_records.h"
#include "runtimes/hotspot_abi.h"
#include "unwind/unwind_table.h"

namespace flamebpf::hotspot {

using unwind::UnwindTable;

// An address range [start, end).
struct CodeRange {
  uint64_t start = 0;
  uint64_t end = 0;
};

// Records the builder dropped as garbage: their code unwinds by frame pointers.
struct JitTableDrops {
  uint64_t frame_too_large = 0;    // frame_words beyond kMaxJitFrameWords
  uint64_t outside_code_cache = 0; // not inside one of the JVM's executable anonymous mappings
  uint64_t over_budget = 0;        // beyond kMaxJitRows rows
  uint64_t total() const { return frame_too_large + outside_code_cache + over_budget; }
};

// The largest frame described: its CFA offset must fit the row's 16 bits. HotSpot's largest
// frames are a few hundred words.
inline constexpr uint32_t kMaxJitFrameWords = 4095;
// Rows of one JVM's table (8 bytes each): about four per method, for 256k methods.
inline constexpr size_t kMaxJitRows = 1 << 20;

// Builds the table of records, keeping only code inside code_cache (the JVM's executable
// anonymous mappings, sorted by start). nullopt if nothing is left to describe.
std::optional<UnwindTable> build_jit_table(const JvmRecords& records,
                                           const std::vector<CodeRange>& code_cache,
                                           JitTableDrops* drops);

// Rebuilds one JVM's table when its records changed, at most once per call (the caller calls
// once per interval).
class JitTableKeeper {
public:
  // The new table if the records changed since the last build, else nullopt. drops is what the
  // build dropped, if it built.
  std::optional<UnwindTable> rebuild(const JvmRecords& records,
                                     const std::vector<CodeRange>& code_cache,
                                     JitTableDrops* drops);

private:
  std::optional<uint64_t> built_generation_;
};

} // namespace flamebpf::hotspot
