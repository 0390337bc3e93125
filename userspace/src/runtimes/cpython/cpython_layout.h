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

// A field the version does not have.
inline constexpr uint32_t kNoField = UINT32_MAX;

struct CPythonLayout {
  uint32_t major = 3;
  uint32_t minor = 0;
  // PyObject: its type.
  uint32_t object_type = 0;
  // _PyRuntimeState: the list of interpreters, and the thread state that holds the GIL (3.11; from
  // 3.12 a thread-local variable of each thread).
  uint32_t runtime_interpreters_head = 0;
  uint32_t runtime_gil_holder = kNoField;
  // PyInterpreterState (struct _is).
  uint32_t interpreter_next = 0;
  uint32_t interpreter_threads_head = 0;
  // PyThreadState (struct _ts).
  uint32_t thread_next = 0;
  uint32_t thread_interpreter = 0;
  uint32_t thread_native_id = 0; // the thread's id in its pid namespace, as gettid() gives it
  // Its _PyCFrame (3.11, 3.12), which holds the frame it evaluates now; from 3.13 that frame.
  uint32_t thread_frame = 0;
  // _PyCFrame: the frame the thread evaluates now; none from 3.13.
  uint32_t cframe_current_frame = kNoField;
  // _PyInterpreterFrame.
  uint32_t frame_code = 0; // f_code; from 3.13 f_executable, a code object or another object
  uint32_t frame_previous = 0;
  // A code unit pointer: the instruction last begun (prev_instr), from 3.13 the one under way.
  uint32_t frame_instruction = 0;
  // How the frames one C call of the evaluation loop runs end. 3.11: is_entry, a byte set on the
  // first of them. From 3.12: owner, a byte; a frame owned by the C stack (kOwnedByCStack) is the
  // loop's own, below the first of them, and no Python function's.
  uint32_t frame_is_entry = kNoField;
  uint32_t frame_owner = kNoField;
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

// _PyInterpreterFrame.owner of the frame the evaluation loop keeps on the C stack (3.12 on).
inline constexpr uint8_t kOwnedByCStack = 3;

// The layout of CPython major.minor, if one checked against a real interpreter is known.
std::optional<CPythonLayout> verified_layout(uint32_t major, uint32_t minor);

} // namespace flamebpf::cpython
