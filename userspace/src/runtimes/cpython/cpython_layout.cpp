#include "runtimes/cpython/cpython_layout.h"

namespace flamebpf::cpython {

namespace {

// CPython 3.11 (Include/internal/pycore_runtime.h, pycore_interp.h, pycore_frame.h,
// Include/cpython/pystate.h, code.h, unicodeobject.h, bytesobject.h), checked against Debian's
// 3.11.2 and a 3.11.7 built with --enable-shared. Each layout is checked by
// tests/unit/runtimes/cpython/cpython_test.cpp against what its version's own headers say.
constexpr CPythonLayout kCPython311{
    .major = 3,
    .minor = 11,
    .object_type = 8,
    .runtime_interpreters_head = 40,
    .runtime_gil_holder = 576,
    .interpreter_next = 0,
    .interpreter_threads_head = 16,
    .thread_next = 8,
    .thread_interpreter = 16,
    .thread_native_id = 160,
    .thread_frame = 56,
    .cframe_current_frame = 8,
    .frame_code = 32,
    .frame_previous = 48,
    .frame_instruction = 56,
    .frame_is_entry = 68,
    .code_first_line = 72,
    .code_filename = 112,
    .code_name = 120,
    .code_qualname = 128,
    .code_line_table = 136,
    .code_instructions = 184,
    .str_length = 16,
    .str_state = 32,
    .str_ascii_data = 48,
    .str_compact_data = 72,
    .bytes_size = 16,
    .bytes_data = 32,
};

// CPython 3.12: the GIL's holder is a thread-local variable, and the evaluation loop keeps a frame
// of its own on the C stack (owner) instead of marking its first (is_entry). Checked against a
// 3.12.1 built with --enable-shared.
constexpr CPythonLayout kCPython312{
    .major = 3,
    .minor = 12,
    .object_type = 8,
    .runtime_interpreters_head = 40,
    .interpreter_next = 0,
    .interpreter_threads_head = 72,
    .thread_next = 8,
    .thread_interpreter = 16,
    .thread_native_id = 144,
    .thread_frame = 56,
    .cframe_current_frame = 0,
    .frame_code = 0,
    .frame_previous = 8,
    .frame_instruction = 56,
    .frame_owner = 70,
    .code_first_line = 68,
    .code_filename = 112,
    .code_name = 120,
    .code_qualname = 128,
    .code_line_table = 136,
    .code_instructions = 192,
    .str_length = 16,
    .str_state = 32,
    .str_ascii_data = 40,
    .str_compact_data = 56,
    .bytes_size = 16,
    .bytes_data = 32,
};

// CPython 3.13: a thread state holds its current frame itself (no _PyCFrame), and a frame's code
// is f_executable. Checked against a 3.13.0 built with --enable-shared (not free-threaded).
constexpr CPythonLayout kCPython313{
    .major = 3,
    .minor = 13,
    .object_type = 8,
    .runtime_interpreters_head = 632,
    .interpreter_next = 7264,
    .interpreter_threads_head = 7344,
    .thread_next = 8,
    .thread_interpreter = 16,
    .thread_native_id = 160,
    .thread_frame = 72,
    .frame_code = 0,
    .frame_previous = 8,
    .frame_instruction = 56,
    .frame_owner = 70,
    .code_first_line = 68,
    .code_filename = 112,
    .code_name = 120,
    .code_qualname = 128,
    .code_line_table = 136,
    .code_instructions = 200,
    .str_length = 16,
    .str_state = 32,
    .str_ascii_data = 40,
    .str_compact_data = 56,
    .bytes_size = 16,
    .bytes_data = 32,
};

} // namespace

std::optional<CPythonLayout> verified_layout(uint32_t major, uint32_t minor)
{
  if (major == 3 && minor == 11)
    return kCPython311;
  if (major == 3 && minor == 12)
    return kCPython312;
  if (major == 3 && minor == 13)
    return kCPython313;
  return std::nullopt;
}

} // namespace flamebpf::cpython
