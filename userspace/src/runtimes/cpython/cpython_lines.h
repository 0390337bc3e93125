// The line of a CPython 3.11 instruction, from its code object's location table (co_linetable,
// Objects/locations.md): entries of a start byte (the top bit set, a kind in the next four bits,
// the code units it covers, less one, in the last three) and what the kind says follows, the
// line moving by a signed delta from co_firstlineno. The table is the target's, so hostile: a
// read past its end, a varint that runs on or a line out of range ends the walk, unanswered.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace flamebpf::cpython {

// The line of code units that have none.
inline constexpr uint32_t kNoLine = UINT32_MAX;

// Code units with one line: up to end (the first unit past them), at line, or kNoLine.
struct LineSpan {
  uint32_t end = 0;
  uint32_t line = 0;
  friend bool operator==(const LineSpan&, const LineSpan&) = default;
};

// The table's spans in order, each next to its neighbours' other lines, as far as the table can be
// read: a code object's lines, decoded once, looked up by a binary search at each sample.
std::vector<LineSpan> line_spans(std::string_view table, uint32_t first_line);

// The line of the code unit instruction (its index, 2 bytes a unit) in spans; nullopt if they do
// not say.
std::optional<uint32_t> line_in_spans(const std::vector<LineSpan>& spans, uint32_t instruction);

// The line of the instruction at code unit instruction, for code whose first line is first_line
// and location table is table; nullopt if the table does not say.
std::optional<uint32_t>
line_of_instruction(std::string_view table, uint32_t first_line, uint32_t instruction);

} // namespace flamebpf::cpython
