// The calls Go's compiler inlined, from a binary's pclntab (runtimes/go/pclntab.h), as an inline
// index like DWARF's (dwarf_inlines.h): a stripped Go binary has no DWARF, but Go's own
// tracebacks need the inline tree, so every Go binary keeps it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/elf_reader.h"
#include "common/result.h"
#include "symbolize/dwarf_inlines.h"

namespace flamebpf::symbolize {

// Inlined call ranges kept from one binary at most; past them, the rest of its functions keep
// only their own names.
inline constexpr size_t kMaxGoInlineRanges = 1 << 21;

// Fails when reader is no Go binary or its table is malformed; what a budget cut is added to
// problems.
[[nodiscard]] Result<std::unique_ptr<InlineIndex>>
build_go_inline_index(const ElfReader& reader, std::vector<std::string>& problems);

} // namespace flamebpf::symbolize
