/* Prints where CPython's own headers put the fields flamebpf reads (runtimes/cpython/
 * cpython_layout.h), one "field offset" line each, in the layout's names, and "field none" for one
 * the version does not have; from 3.13, where its _Py_DebugOffsets say each (debug_offsets.h),
 * "debug.field position": built against the headers of each CPython at hand (3.11 to 3.13), it is
 * the oracle the layouts are checked against. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_frame.h>
#include <internal/pycore_interp.h>
#include <internal/pycore_runtime.h>
#include <stddef.h>
#include <stdio.h>

#define SHOW(field, type, member) printf("%s %zu\n", field, offsetof(type, member))
#define NONE(field) printf("%s none\n", field)

int main(void)
{
  printf("version %d.%d\n", PY_MAJOR_VERSION, PY_MINOR_VERSION);
  SHOW("object_type", PyObject, ob_type);
  SHOW("runtime_interpreters_head", _PyRuntimeState, interpreters.head);
#if PY_MINOR_VERSION == 11
  SHOW("runtime_gil_holder", _PyRuntimeState, gilstate.tstate_current);
#else
  NONE("runtime_gil_holder"); /* a thread-local from 3.12 */
#endif
  SHOW("interpreter_next", PyInterpreterState, next);
  SHOW("interpreter_threads_head", PyInterpreterState, threads.head);
  SHOW("thread_next", PyThreadState, next);
  SHOW("thread_interpreter", PyThreadState, interp);
  SHOW("thread_native_id", PyThreadState, native_thread_id);
#if PY_MINOR_VERSION <= 12
  SHOW("thread_frame", PyThreadState, cframe);
  SHOW("cframe_current_frame", _PyCFrame, current_frame);
#else
  SHOW("thread_frame", PyThreadState, current_frame);
  NONE("cframe_current_frame");
#endif
#if PY_MINOR_VERSION <= 12
  SHOW("frame_code", _PyInterpreterFrame, f_code);
  SHOW("frame_instruction", _PyInterpreterFrame, prev_instr);
#else
  SHOW("frame_code", _PyInterpreterFrame, f_executable);
  SHOW("frame_instruction", _PyInterpreterFrame, instr_ptr);
#endif
  SHOW("frame_previous", _PyInterpreterFrame, previous);
#if PY_MINOR_VERSION == 11
  SHOW("frame_is_entry", _PyInterpreterFrame, is_entry);
  NONE("frame_owner");
#else
  NONE("frame_is_entry");
  SHOW("frame_owner", _PyInterpreterFrame, owner);
#endif
  SHOW("code_first_line", PyCodeObject, co_firstlineno);
  SHOW("code_filename", PyCodeObject, co_filename);
  SHOW("code_name", PyCodeObject, co_name);
  SHOW("code_qualname", PyCodeObject, co_qualname);
  SHOW("code_line_table", PyCodeObject, co_linetable);
  SHOW("code_instructions", PyCodeObject, co_code_adaptive);
  SHOW("str_length", PyASCIIObject, length);
  SHOW("str_state", PyASCIIObject, state);
  printf("str_ascii_data %zu\n", sizeof(PyASCIIObject));
  printf("str_compact_data %zu\n", sizeof(PyCompactUnicodeObject));
  SHOW("bytes_size", PyVarObject, ob_size);
  SHOW("bytes_data", PyBytesObject, ob_sval);
#if PY_MINOR_VERSION >= 13
  /* Where _Py_DebugOffsets keeps each of them: "debug.field position". */
  SHOW("debug.runtime_interpreters_head", _Py_DebugOffsets, runtime_state.interpreters_head);
  SHOW("debug.interpreter_next", _Py_DebugOffsets, interpreter_state.next);
  SHOW("debug.interpreter_threads_head", _Py_DebugOffsets, interpreter_state.threads_head);
  SHOW("debug.thread_next", _Py_DebugOffsets, thread_state.next);
  SHOW("debug.thread_interpreter", _Py_DebugOffsets, thread_state.interp);
  SHOW("debug.thread_frame", _Py_DebugOffsets, thread_state.current_frame);
  SHOW("debug.thread_native_id", _Py_DebugOffsets, thread_state.native_thread_id);
  SHOW("debug.frame_previous", _Py_DebugOffsets, interpreter_frame.previous);
  SHOW("debug.frame_code", _Py_DebugOffsets, interpreter_frame.executable);
  SHOW("debug.frame_instruction", _Py_DebugOffsets, interpreter_frame.instr_ptr);
  SHOW("debug.frame_owner", _Py_DebugOffsets, interpreter_frame.owner);
  SHOW("debug.code_filename", _Py_DebugOffsets, code_object.filename);
  SHOW("debug.code_name", _Py_DebugOffsets, code_object.name);
  SHOW("debug.code_qualname", _Py_DebugOffsets, code_object.qualname);
  SHOW("debug.code_line_table", _Py_DebugOffsets, code_object.linetable);
  SHOW("debug.code_first_line", _Py_DebugOffsets, code_object.firstlineno);
  SHOW("debug.code_instructions", _Py_DebugOffsets, code_object.co_code_adaptive);
  SHOW("debug.object_type", _Py_DebugOffsets, pyobject.ob_type);
  SHOW("debug.bytes_size", _Py_DebugOffsets, bytes_object.ob_size);
  SHOW("debug.bytes_data", _Py_DebugOffsets, bytes_object.ob_sval);
  SHOW("debug.str_state", _Py_DebugOffsets, unicode_object.state);
  SHOW("debug.str_length", _Py_DebugOffsets, unicode_object.length);
  SHOW("debug.str_ascii_data", _Py_DebugOffsets, unicode_object.asciiobject_size);
#endif
  return 0;
}
