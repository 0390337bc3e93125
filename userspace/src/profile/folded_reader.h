// Reads folded stacks ("frame;frame;…;frame count", one stack per line) as flamebpf, flamegraph.pl,
// inferno and `perf script | stackcollapse-perf.pl` write them, for rendering and diffing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/text.h"
#include "profile/symbolized_profile.h"

namespace flamebpf::profile {

struct FoldedInput {
  SymbolizedProfile profile; // each line a Stack: its first frame as comm, the rest as frames
  uint64_t bad_lines = 0;    // lines without a stack or a whole-number count, skipped
};

// A frame's kind from the suffix folded output gives it ("_[k]" kernel, "_[j]" JIT-compiled,
// "_[i]" inlined), which is removed from name; "[unknown]" is unknown, anything else native.
FrameKind folded_frame_kind(std::string_view& name);

// One line of folded text: its stack (frames joined by ';') and count.
struct FoldedLine {
  std::string_view stack;
  uint64_t count = 0;
};

// Calls on_line for each well-formed line of text ("stack count", a whole-number count; a
// trailing '\r' is ignored), skipping empty lines; returns the number of malformed lines.
template <class OnLine> uint64_t for_each_folded_line(std::string_view text, OnLine on_line);

// Parses one line without its newline; nullopt if it is malformed.
std::optional<FoldedLine> parse_folded_line(std::string_view line);

// Adds the stacks of folded text to input. Counts are whole numbers.
void parse_folded(std::string_view text, FoldedInput& input);

// Reads a folded file ("-" for stdin) into input.
[[nodiscard]] Result<> read_folded_file(const std::string& path, FoldedInput& input);

// Reads folded files into one input, failing (as a usage error) on the first that cannot be
// read; logs one warning if lines were skipped.
[[nodiscard]] Result<FoldedInput> read_folded_files(const std::vector<std::string>& paths);

template <class OnLine> uint64_t for_each_folded_line(std::string_view text, OnLine on_line)
{
  uint64_t bad = 0;
  for (std::string_view line : text::lines(text)) {
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    if (line.empty())
      continue;
    if (auto parsed = parse_folded_line(line))
      on_line(*parsed);
    else
      ++bad;
  }
  return bad;
}

} // namespace flamebpf::profile
