#include "runtimes/cpython/debug_offsets.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "common/log.h"

namespace flamebpf::cpython {
namespace {

constexpr std::string_view kCookie = "xdebugpy";
// The words before the structs of offsets: cookie, version (PY_VERSION_HEX), free_threaded.
constexpr uint32_t kVersionPosition = 8;
constexpr uint32_t kFreeThreadedPosition = 16;

// 3.13's _Py_DebugOffsets (Include/internal/pycore_runtime.h), each position checked against its
// headers by tests/progs/cpython_offsets.c.
constexpr DebugOffsetField kFields313[] = {
    {"runtime_interpreters_head", "runtime_state.interpreters_head", 40,
     &CPythonLayout::runtime_interpreters_head},
    {"interpreter_next", "interpreter_state.next", 64, &CPythonLayout::interpreter_next},
    {"interpreter_threads_head", "interpreter_state.threads_head", 72,
     &CPythonLayout::interpreter_threads_head},
    {"thread_next", "thread_state.next", 168, &CPythonLayout::thread_next},
    {"thread_interpreter", "thread_state.interp", 176, &CPythonLayout::thread_interpreter},
    {"thread_frame", "thread_state.current_frame", 184, &CPythonLayout::thread_frame},
    {"thread_native_id", "thread_state.native_thread_id", 200, &CPythonLayout::thread_native_id},
    {"frame_previous", "interpreter_frame.previous", 232, &CPythonLayout::frame_previous},
    {"frame_code", "interpreter_frame.executable", 240, &CPythonLayout::frame_code},
    {"frame_instruction", "interpreter_frame.instr_ptr", 248, &CPythonLayout::frame_instruction},
    {"frame_owner", "interpreter_frame.owner", 264, &CPythonLayout::frame_owner},
    {"code_filename", "code_object.filename", 280, &CPythonLayout::code_filename},
    {"code_name", "code_object.name", 288, &CPythonLayout::code_name},
    {"code_qualname", "code_object.qualname", 296, &CPythonLayout::code_qualname},
    {"code_line_table", "code_object.linetable", 304, &CPythonLayout::code_line_table},
    {"code_first_line", "code_object.firstlineno", 312, &CPythonLayout::code_first_line},
    {"code_instructions", "code_object.co_code_adaptive", 344, &CPythonLayout::code_instructions},
    {"object_type", "pyobject.ob_type", 360, &CPythonLayout::object_type},
    {"bytes_size", "bytes_object.ob_size", 520, &CPythonLayout::bytes_size},
    {"bytes_data", "bytes_object.ob_sval", 528, &CPythonLayout::bytes_data},
    {"str_state", "unicode_object.state", 544, &CPythonLayout::str_state},
    {"str_length", "unicode_object.length", 552, &CPythonLayout::str_length},
    {"str_ascii_data", "unicode_object.asciiobject_size", 560, &CPythonLayout::str_ascii_data},
};

uint64_t word_at(std::string_view bytes, uint32_t position)
{
  uint64_t word = 0;
  std::memcpy(&word, bytes.data() + position, sizeof word);
  return word;
}

} // namespace

std::span<const DebugOffsetField> debug_offset_fields(uint32_t minor)
{
  if (minor == 13)
    return kFields313;
  return {};
}

size_t debug_offsets_bytes(uint32_t minor)
{
  size_t end = 0;
  for (const auto& field : debug_offset_fields(minor))
    end = std::max<size_t>(end, field.position + sizeof(uint64_t));
  return end;
}

Result<std::string> read_runtime_start(const ElfReader& elf, const CPythonFile& file)
{
  size_t needed = debug_offsets_bytes(file.minor);
  if (needed == 0)
    return std::string();
  auto at = elf.file_offset_of(file.in_file.runtime);
  if (!at || at->second < needed)
    return fail(error(elf.shown() + ": its _PyRuntime has no " + std::to_string(needed) +
                      " bytes in the file"));
  return elf.bytes().read(at->first, needed);
}

Result<> check_debug_offsets(std::string_view runtime_start,
                             const CPythonFile& file,
                             const CPythonLayout& layout)
{
  auto fields = debug_offset_fields(file.minor);
  size_t needed = debug_offsets_bytes(file.minor);
  if (fields.empty())
    return {};
  if (runtime_start.size() < needed || !runtime_start.starts_with(kCookie))
    return fail(error("no _Py_DebugOffsets at the start of its _PyRuntime"));
  uint64_t version = word_at(runtime_start, kVersionPosition);
  if (((version >> 24) & 0xff) != file.major || ((version >> 16) & 0xff) != file.minor)
    return fail(error(fmt::format("its _Py_DebugOffsets are of another version ({:#x}) than its "
                                  "Py_Version",
                                  version)));
  if (word_at(runtime_start, kFreeThreadedPosition) != 0)
    return fail(error("a free-threaded build, laid out otherwise"));
  for (const auto& field : fields) {
    uint64_t said = word_at(runtime_start, field.position);
    uint32_t held = layout.*field.field;
    if (said != held)
      return fail(error("its _Py_DebugOffsets put " + std::string(field.said_as) + " at " +
                        std::to_string(said) + ", the verified layout at " + std::to_string(held)));
  }
  return {};
}

} // namespace flamebpf::cpython
