// The offsets a CPython publishes about itself from 3.13 on (_Py_DebugOffsets, the first member of
// _PyRuntime, statically initialized, so in the file as it was built): where its own build put
// each field that tools reading it from outside need. flamebpf reads a version by its verified
// layout (cpython_layout.h) only; for 3.13 it checks that layout against them first, so that a
// build laid out otherwise (free-threaded, or patched) is refused, not read wrong. The bytes are a
// target's file's: a wrong cookie, version or size is a refusal, never a crash.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/elf_reader.h"
#include "common/result.h"
#include "runtimes/cpython/cpython_file.h"
#include "runtimes/cpython/cpython_layout.h"

namespace flamebpf::cpython {

// One field of the layout as _Py_DebugOffsets says where it is.
struct DebugOffsetField {
  std::string_view name;    // the layout's: "thread_native_id"
  std::string_view said_as; // the struct's: "thread_state.native_thread_id"
  uint32_t position;        // of its uint64_t in _Py_DebugOffsets
  uint32_t CPythonLayout::*field;
};

// The fields of the layout that 3.minor's _Py_DebugOffsets says; empty before 3.13 and for a
// version whose _Py_DebugOffsets flamebpf has not checked against that version's headers.
std::span<const DebugOffsetField> debug_offset_fields(uint32_t minor);

// Bytes of the start of _PyRuntime that debug_offset_fields(minor) lie in; 0 if there are none.
size_t debug_offsets_bytes(uint32_t minor);

// The first debug_offsets_bytes(file.minor) bytes of file's _PyRuntime as elf holds them; empty
// if the version has none. Fails if elf has not that many bytes there.
[[nodiscard]] Result<std::string> read_runtime_start(const ElfReader& elf, const CPythonFile& file);

// Checks layout, for file, against the _Py_DebugOffsets at the start of runtime_start (the file's
// _PyRuntime, at least debug_offsets_bytes(file.minor) bytes). Fails, in words, on a missing
// cookie, another version, a free-threaded build, or a field the two put apart.
[[nodiscard]] Result<> check_debug_offsets(std::string_view runtime_start,
                                           const CPythonFile& file,
                                           const CPythonLayout& layout);

} // namespace flamebpf::cpython
