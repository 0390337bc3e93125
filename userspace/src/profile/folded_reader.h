// Reads folded stacks ("frame;frame;…;frame count", one stack per line) as flamebpf, flamegraph.pl,
// inferno and `perf script | stackcollapse-perf.pl` write them, for rendering and diffing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"
#include "profile/symbolized_profile.h"

namespace flamebpf::profile {

struct FoldedInput {
  SymbolizedProfile profile; // each line a Stack: its first frame as comm, the rest as frames
  uint64_t bad_lines = 0;    // lines without a stack or a whole-number count, skipped
};

// A frame's kind from the suffix folded output gives it ("_[k]" kernel, "_[j]" JIT-compiled,
// "_[i]" inlined), which is removed from name; "[unknown]" is unknown, anything else native.
FrameKind folded_frame_kind(std::string_view& name);

// Adds the stacks of folded text to input. Counts are whole numbers.
void parse_folded(std::string_view text, FoldedInput& input);

// Reads a folded file ("-" for stdin) into input.
[[nodiscard]] Result<> read_folded_file(const std::string& path, FoldedInput& input);

} // namespace flamebpf::profile
