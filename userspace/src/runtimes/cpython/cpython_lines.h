// The line of a CPython 3.11 instruction, from its code object's location table (co_linetable,
// Objects/locations.md): entries of a start byte (the top bit set, a kind in the next four bits,
// the code units it covers, less one, in the last three) and what the kind says follows, the
// line moving by a signed delta from co_firstlineno. The table is the target's, so hostile: a
// read past its end, a varint that runs on or a line out of range ends the walk, unanswered.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace flamebpf::cpython {

// The line of the instruction at code unit instruction (its index, 2 bytes a unit), for code whose
// first line is first_line and location table is table; nullopt if the table does not say.
std::optional<uint32_t>
line_of_instruction(std::string_view table, uint32_t first_line, uint32_t instruction);

} // namespace flamebpf::cpython
