// Where the fields flamebpf reads lie in one CPython version's structures, on x86-64: the
// interpreter's runtime state, its interpreters, their threads, the frames a thread evaluates and
// their code objects, and the str and bytes objects that name them. CPython keeps no stable layout
// for any of them: each version's is taken from its own headers and held here only once checked
// against a real interpreter of that version (tests/unit/runtimes/cpython/cpython_test.cpp
// compiles the headers' offsetof() beside it). Versions without one are told apart, not guessed.
#pragma once

#include <cstdint>
#include <optional>

namespace flamebpf::cpython {

struct CPythonLayout {
  uint32_t major = 3;
  uint32_t minor = 0;
  // PyObject: its type.
  uint32_t object_type = 0;
  // _PyRuntimeState: the list of interpreters, and the thread state that holds the GIL.
  uint32_t runtime_interpreters_head = 0;
  uint32_t runtime_gil_holder = 0;
  // PyInterpreterState (struct _is).
  uint32_t interpreter_next = 0;
  uint32_t interpreter_threads_head = 0;
  // PyThreadState (struct _ts).
  uint32_t thread_next = 0;
  uint32_t thread_interpreter = 0;
  uint32_t thread_native_id = 0; // the thread's id in its pid namespace, as gettid() gives it
  uint32_t thread_cframe = 0;    // its _PyCFrame
  // _PyCFrame: the frame the thread evaluates now.
  uint32_t cframe_current_frame = 0;
  // _PyInterpreterFrame.
  uint32_t frame_code = 0;
  uint32_t frame_previous = 0;
  uint32_t frame_instruction = 0; // prev_instr: the instruction last begun, a code unit pointer
  uint32_t frame_is_entry = 0;    // a byte: the frame a C call of the evaluation loop began with
  // PyCodeObject.
  uint32_t code_first_line = 0; // int
  uint32_t code_filename = 0;
  uint32_t code_name = 0;
  uint32_t code_qualname = 0;
  uint32_t code_line_table = 0;   // co_linetable, a bytes object
  uint32_t code_instructions = 0; // co_code_adaptive: the code units, inside the object
  // str: the length, the state bits (kind, compact, ascii), and where a compact string's
  // characters start when it is ASCII, or not.
  uint32_t str_length = 0;
  uint32_t str_state = 0;
  uint32_t str_ascii_data = 0;
  uint32_t str_compact_data = 0;
  // bytes: ob_size and the bytes.
  uint32_t bytes_size = 0;
  uint32_t bytes_data = 0;
};

// The layout of CPython major.minor, if one checked against a real interpreter is known.
std::optional<CPythonLayout> verified_layout(uint32_t major, uint32_t minor);

} // namespace flamebpf::cpython
