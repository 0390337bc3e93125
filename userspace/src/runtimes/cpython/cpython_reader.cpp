#include "runtimes/cpython/cpython_reader.h"

#include <algorithm>
#include <unordered_set>

#include "common/utf8.h"
#include "runtimes/cpython/cpython_lines.h"
#include "symbolize/name_cut.h"

namespace flamebpf::cpython {

namespace {

// A pointer a process could hold to one of its objects: in the lower half, past the first page,
// aligned as CPython aligns its objects.
bool plausible_object(uint64_t address)
{
  return address >= 4096 && address < (1ULL << 47) && address % 8 == 0;
}

// The bits of a str's state word (3.11 and 3.12 agree): its kind (1, 2 or 4 bytes a character),
// whether its characters follow the object (compact) and are ASCII.
constexpr uint32_t kKindShift = 2;
constexpr uint32_t kKindMask = 7;
constexpr uint32_t kCompactBit = 1u << 5;
constexpr uint32_t kAsciiBit = 1u << 6;

} // namespace

Result<std::vector<PythonThread>> CPythonReader::threads()
{
  memory_.renew_budget(kBytesPerRead);
  // From 3.12 the holder is a thread-local variable: no thread is said to hold it.
  std::optional<uint64_t> gil_holder = 0;
  if (layout_.runtime_gil_holder != kNoField)
    gil_holder = memory_.load<uint64_t>(addresses_.runtime + layout_.runtime_gil_holder);
  auto interpreter = memory_.load<uint64_t>(addresses_.runtime + layout_.runtime_interpreters_head);
  if (!gil_holder || !interpreter)
    return fail(
        error("cannot read the runtime state of CPython process " + std::to_string(memory_.pid())));
  std::vector<PythonThread> found;
  std::unordered_set<uint64_t> interpreters_met;
  std::unordered_set<uint64_t> threads_met;
  for (uint64_t at = *interpreter;
       plausible_object(at) && interpreters_met.size() < kMaxInterpreters;) {
    if (!interpreters_met.insert(at).second)
      break; // a loop
    auto thread = memory_.load<uint64_t>(at + layout_.interpreter_threads_head);
    while (thread && plausible_object(*thread) && threads_met.size() < kMaxThreads &&
           threads_met.insert(*thread).second) {
      PythonThread read;
      auto native_id = memory_.load<uint64_t>(*thread + layout_.thread_native_id);
      auto frame = memory_.load<uint64_t>(*thread + layout_.thread_frame);
      if (!native_id || !frame)
        break;
      read.native_id = static_cast<uint32_t>(*native_id);
      read.holds_gil = *gil_holder != 0 && *thread == *gil_holder;
      // Through its _PyCFrame, before 3.13.
      if (layout_.cframe_current_frame != kNoField)
        frame = plausible_object(*frame)
                    ? memory_.load<uint64_t>(*frame + layout_.cframe_current_frame)
                    : std::nullopt;
      std::unordered_set<uint64_t> frames_met;
      while (frame && *frame != 0) {
        if (!plausible_object(*frame) || !frames_met.insert(*frame).second ||
            read.frames.size() >= kMaxFrames) {
          read.frames_cut = true;
          break;
        }
        auto code = memory_.load<uint64_t>(*frame + layout_.frame_code);
        auto instruction = memory_.load<uint64_t>(*frame + layout_.frame_instruction);
        if (!code || !plausible_object(*code) || !instruction) {
          read.frames_cut = true;
          break;
        }
        // From 3.12 the evaluation loop keeps a frame of its own between its C calls' frames.
        if (layout_.frame_owner != kNoField) {
          auto owner = memory_.load<uint8_t>(*frame + layout_.frame_owner);
          if (!owner) {
            read.frames_cut = true;
            break;
          }
          if (*owner == kOwnedByCStack) {
            frame = memory_.load<uint64_t>(*frame + layout_.frame_previous);
            continue;
          }
        }
        // Before the first instruction (a frame just pushed) is before unit 0.
        uint64_t first = *code + layout_.code_instructions;
        uint64_t unit = *instruction >= first ? (*instruction - first) / 2 : 0;
        read.frames.push_back({*code, static_cast<uint32_t>(std::min<uint64_t>(unit, UINT32_MAX))});
        frame = memory_.load<uint64_t>(*frame + layout_.frame_previous);
        if (!frame)
          read.frames_cut = true;
      }
      found.push_back(std::move(read));
      thread = memory_.load<uint64_t>(*thread + layout_.thread_next);
    }
    auto next = memory_.load<uint64_t>(at + layout_.interpreter_next);
    if (!next)
      break;
    at = *next;
  }
  if (memory_.budget_spent())
    return fail(error("CPython process " + std::to_string(memory_.pid()) + ": its threads take " +
                      "more than " + std::to_string(kBytesPerRead >> 10) + " KiB to read"));
  return found;
}

bool CPythonReader::is_a(uint64_t address, uint64_t type) const
{
  if (!plausible_object(address))
    return false;
  auto held = memory_.load<uint64_t>(address + layout_.object_type);
  return held && *held == type;
}

std::optional<std::string> CPythonReader::text(uint64_t address, bool& cut)
{
  if (!is_a(address, addresses_.str_type))
    return std::nullopt;
  auto length = memory_.load<int64_t>(address + layout_.str_length);
  auto state = memory_.load<uint32_t>(address + layout_.str_state);
  if (!length || !state || *length < 0 || !(*state & kCompactBit))
    return std::nullopt;
  uint32_t kind = (*state >> kKindShift) & kKindMask;
  bool ascii = (*state & kAsciiBit) != 0;
  if (kind != 1 && kind != 2 && kind != 4)
    return std::nullopt;
  // At most kMaxNameBytes characters: their UTF-8 is cut to the budget below.
  uint64_t characters = std::min<uint64_t>(static_cast<uint64_t>(*length), kMaxNameBytes);
  cut |= characters < static_cast<uint64_t>(*length);
  uint64_t data = address + (ascii ? layout_.str_ascii_data : layout_.str_compact_data);
  std::string units(characters * kind, '\0');
  if (!units.empty() && !memory_.read(data, units.data(), units.size()))
    return std::nullopt;
  std::string out;
  for (uint64_t i = 0; i < characters && out.size() < kMaxNameBytes; ++i) {
    char32_t point = 0;
    for (uint32_t byte = 0; byte < kind; ++byte)
      point |= static_cast<char32_t>(static_cast<unsigned char>(units[i * kind + byte]))
               << (8 * byte);
    if (ascii && point >= 0x80)
      return std::nullopt; // it said ASCII
    utf8::append_code_point(out, point);
  }
  if (out.size() > kMaxNameBytes) {
    out = utf8::valid(std::string_view(out).substr(0, kMaxNameBytes));
    cut = true;
  }
  return out;
}

std::optional<PythonCode> CPythonReader::code(uint64_t code)
{
  memory_.renew_budget(kBytesPerRead);
  if (!is_a(code, addresses_.code_type))
    return std::nullopt;
  auto name = memory_.load<uint64_t>(code + layout_.code_qualname);
  auto filename = memory_.load<uint64_t>(code + layout_.code_filename);
  auto first_line = memory_.load<int32_t>(code + layout_.code_first_line);
  if (!name || !filename || !first_line)
    return std::nullopt;
  PythonCode read;
  auto name_text = text(*name, read.cut);
  auto filename_text = text(*filename, read.cut);
  if (!name_text || !filename_text)
    return std::nullopt;
  read.name = std::move(*name_text);
  read.filename = std::move(*filename_text);
  read.first_line = *first_line > 0 ? static_cast<uint32_t>(*first_line) : 0;
  read.name_object = *name;
  if (read.cut)
    read.name += symbolize::kTruncated;
  return read;
}

std::optional<uint64_t> CPythonReader::name_object(uint64_t code)
{
  memory_.renew_budget(kBytesPerRead);
  if (!is_a(code, addresses_.code_type))
    return std::nullopt;
  return memory_.load<uint64_t>(code + layout_.code_qualname);
}

std::optional<uint32_t> CPythonReader::line(const PythonFrame& frame)
{
  memory_.renew_budget(kBytesPerRead);
  auto first_line = memory_.load<int32_t>(frame.code + layout_.code_first_line);
  auto table = line_table(frame.code);
  if (!first_line || *first_line < 0 || !table)
    return std::nullopt;
  return line_of_instruction(*table, static_cast<uint32_t>(*first_line), frame.instruction);
}

std::optional<std::string> CPythonReader::line_table(uint64_t code)
{
  memory_.renew_budget(kBytesPerRead);
  if (!is_a(code, addresses_.code_type))
    return std::nullopt;
  auto table = memory_.load<uint64_t>(code + layout_.code_line_table);
  if (!table || !is_a(*table, addresses_.bytes_type))
    return std::nullopt;
  auto size = memory_.load<int64_t>(*table + layout_.bytes_size);
  if (!size || *size < 0 || static_cast<uint64_t>(*size) > kMaxLineTableBytes)
    return std::nullopt;
  std::string bytes(static_cast<size_t>(*size), '\0');
  if (!bytes.empty() && !memory_.read(*table + layout_.bytes_data, bytes.data(), bytes.size()))
    return std::nullopt;
  return bytes;
}

} // namespace flamebpf::cpython
