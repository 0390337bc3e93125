#include "runtimes/cpython/cpython_runtime.h"

#include <cerrno>
#include <csignal>
#include <functional>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "common/exported_objects.h"
#include "common/log.h"
#include "common/mapped_file.h"
#include "profile/source_name.h"
#include "runtimes/cpython/cpython_lines.h"
#include "runtimes/cpython/debug_offsets.h"
#include "runtimes/cpython_abi.h"

namespace flamebpf::cpython {
namespace {

// What opening an interpreter's file found: its CPython and where it is loaded.
struct Opened {
  std::optional<CPythonFile> file;
  std::string runtime_start; // its _PyRuntime's first bytes, where 3.13 on say its own layout
  uint64_t bias = 0;
  uint64_t eval_start = 0, eval_end = 0; // _PyEval_EvalFrameDefault in the process
};

Result<Opened> open_cpython(const std::string& process, const procfs::Mapping& mapping)
{
  auto mapped = open_mapped_elf(process, mapping);
  if (!mapped)
    return fail(mapped.error());
  const ElfReader& elf = mapped->elf;
  auto found = find_cpython(elf, mapping.path);
  if (!found)
    return fail(found.error());
  Opened opened;
  if (!*found)
    return opened;
  auto bias = load_bias(elf, mapping);
  if (!bias)
    return fail(error(elf.shown() + ": no load segment where it is mapped"));
  auto runtime_start = read_runtime_start(elf, **found);
  if (!runtime_start)
    return fail(runtime_start.error());
  opened.file = std::move(*found);
  opened.runtime_start = std::move(*runtime_start);
  opened.bias = *bias;
  constexpr std::string_view kEval[] = {"_PyEval_EvalFrameDefault"};
  auto eval = exported_objects(elf, *bias, kEval, STT_FUNC);
  if (eval && (*eval)[0]) {
    opened.eval_start = (*eval)[0]->address;
    opened.eval_end = (*eval)[0]->address + (*eval)[0]->size;
  }
  return opened;
}

// One file, whatever path or process maps it: its device and inode.
std::string file_identity(const procfs::Mapping& mapping)
{
  return fmt::format("{}:{}:{}", mapping.device_major, mapping.device_minor, mapping.inode);
}

} // namespace

bool fits_frame_span(const CPythonLayout& layout)
{
  // In 64 bits: a field near UINT32_MAX must not wrap around into the span.
  auto word_fits = [&](uint64_t field, uint64_t size) {
    return field >= layout.frame_code &&
           field + size <= uint64_t{layout.frame_code} + FB_CPYTHON_FRAME_SPAN;
  };
  uint32_t entry = layout.frame_is_entry != kNoField ? layout.frame_is_entry : layout.frame_owner;
  return word_fits(layout.frame_previous, 8) && word_fits(layout.frame_instruction, 8) &&
         word_fits(entry, 1);
}

bool is_cpython_file_name(std::string_view path)
{
  std::string_view file = path.substr(path.rfind('/') + 1);
  return file.starts_with("python") || file.starts_with("libpython3");
}

void CPythonRuntime::captured(symbolize::ProcessTable& processes,
                              const symbolize::ImageKey& key,
                              const symbolize::ProcessImage& image,
                              const std::vector<procfs::Mapping>& mappings)
{
  auto it = images_.find(key);
  if (it != images_.end() && it->second.cpython)
    return;
  for (const auto& mapping : mappings) {
    if (!mapping.executable || !mapping.file_backed() || !is_cpython_file_name(mapping.path))
      continue;
    std::string identity = file_identity(mapping);
    Image& state = images_[key];
    if (files_passed_.contains(identity) || !state.files_tried.insert(identity).second)
      continue;
    try_file(processes, key, mapping, state, image);
    if (state.cpython)
      return;
  }
}

void CPythonRuntime::try_file(symbolize::ProcessTable& processes,
                              const symbolize::ImageKey& key,
                              const procfs::Mapping& mapping,
                              Image& image,
                              const symbolize::ProcessImage& captured_image)
{
  std::string process = processes.proc_root() + "/" + std::to_string(key.pid);
  std::string shown = process + "/root" + mapping.path;
  std::string identity = file_identity(mapping);
  auto outcome = stall_guard_.run<Result<Opened>>(
      [process, mapping] { return open_cpython(process, mapping); });
  if (!outcome || outcome->stalled) {
    if (pass_file(identity))
      spdlog::warn("{}: reading it stalls; the Python frames of process {} are not named", shown,
                   key.pid);
    return;
  }
  auto opened = outcome->result.get();
  if (!opened) {
    // A process that exited meanwhile is no trouble.
    bool gone = ::kill(static_cast<pid_t>(key.pid), 0) != 0 && errno == ESRCH;
    if (!gone && pass_file(identity))
      spdlog::warn("{}; the Python frames of process {} are not named", opened.error().message,
                   key.pid);
    return;
  }
  if (!opened->file) {
    pass_file(identity); // named like an interpreter, but none (Python 2, a launcher)
    return;
  }
  const CPythonFile& file = *opened->file;
  auto layout = verified_layout(file.major, file.minor);
  if (!layout) {
    std::string version = std::to_string(file.major) + "." + std::to_string(file.minor);
    if (pass_file(identity) && versions_said_.insert(version).second)
      spdlog::warn("CPython {}: frames not named, layout not verified (process {}, {}); flamebpf "
                   "reads the CPython versions whose layout it checked against a real interpreter",
                   file.version(), key.pid, shown);
    return;
  }
  // From 3.13 the build says where it put each field: a build laid out otherwise (free-threaded,
  // patched) than the verified layout is not read by it.
  if (auto agreed = check_debug_offsets(opened->runtime_start, file, *layout); !agreed) {
    if (pass_file(identity))
      spdlog::warn("CPython {}: frames not named, {} (process {}, {})", file.version(),
                   agreed.error().message, key.pid, shown);
    return;
  }
  spdlog::debug("process {}: CPython {} in {}", key.pid, file.version(), shown);
  image.cpython = FoundCPython{file, *layout, file.in_file.moved_by(opened->bias)};
  image.reader =
      std::make_shared<CPythonReader>(key.pid, image.cpython->in_process, image.cpython->layout);
  image.charge = MemoryCharge(captured_image.share, MemoryKind::kPythonCode);
  if (!fits_frame_span(*layout)) {
    spdlog::warn("CPython {}: its frame's fields lie too far apart for the frame walk; the "
                 "Python frames of process {} are not named",
                 file.version(), key.pid);
    return;
  }
  if (opened->eval_start >= opened->eval_end) {
    spdlog::warn("{}: no _PyEval_EvalFrameDefault; the Python frames of process {} are not named",
                 shown, key.pid);
    return;
  }
  // CPython keeps its threads' ids as their pid namespace sees them; the walk asks the kernel
  // for the sampled thread's id there, by the namespace's device (the kernel's dev_t) and inode.
  struct stat pid_namespace {};
  std::string namespace_file = processes.proc_root() + "/" + std::to_string(key.pid) + "/ns/pid";
  if (::stat(namespace_file.c_str(), &pid_namespace) != 0)
    return; // the process exited
  const CPythonLayout& l = *layout;
  uint64_t runtime = image.cpython->in_process.runtime;
  fb_cpython_process walk{};
  walk.interpreters_head = runtime + l.runtime_interpreters_head;
  walk.gil_holder = l.runtime_gil_holder != kNoField ? runtime + l.runtime_gil_holder : 0;
  walk.eval_start = opened->eval_start;
  walk.eval_end = opened->eval_end;
  walk.pid_namespace_device =
      (uint64_t{major(pid_namespace.st_dev)} << 20) | minor(pid_namespace.st_dev);
  walk.pid_namespace_inode = pid_namespace.st_ino;
  walk.interpreter_threads_head = l.interpreter_threads_head;
  walk.thread_next = l.thread_next;
  walk.thread_native_id = l.thread_native_id;
  walk.thread_frame = l.thread_frame;
  walk.cframe_current_frame =
      l.cframe_current_frame != kNoField ? l.cframe_current_frame : FB_CPYTHON_NO_FIELD;
  walk.frame_code = l.frame_code;
  walk.frame_previous = l.frame_previous;
  walk.frame_instruction = l.frame_instruction;
  walk.code_instructions = l.code_instructions;
  if (l.frame_is_entry != kNoField) {
    walk.frame_entry = l.frame_is_entry;
    walk.entry_kind = FB_CPYTHON_ENTRY_FLAG;
  } else {
    walk.frame_entry = l.frame_owner;
    walk.entry_kind = FB_CPYTHON_ENTRY_OWNER;
  }
  walks_.push_back({key.pid, key.image_id, walk});
}

bool CPythonRuntime::pass_file(const std::string& identity)
{
  if (files_passed_.size() >= kMaxFilesPassed) {
    spdlog::debug("file {}: not said (more than {} interpreter files passed)", identity,
                  kMaxFilesPassed);
    return false;
  }
  return files_passed_.insert(identity).second;
}

std::optional<runtimes::NamedCode> CPythonRuntime::name_code(symbolize::ProcessTable& processes,
                                                             const symbolize::ImageKey& key,
                                                             uint64_t address,
                                                             bool anonymous)
{
  (void)processes, (void)key, (void)address, (void)anonymous;
  return std::nullopt;
}

std::optional<profile::Frame> CPythonRuntime::name_marker(symbolize::ProcessTable& processes,
                                                          const symbolize::ImageKey& key,
                                                          uint64_t frame)
{
  auto it = images_.find(key);
  if (!(frame & FB_FRAME_RUNTIME_MARKER) || it == images_.end() || !it->second.cpython)
    return std::nullopt;
  uint64_t unit_field = (frame >> FB_CPYTHON_UNIT_SHIFT) & FB_CPYTHON_UNIT_MASK;
  return code_frame(key, it->second, frame & FB_CPYTHON_CODE_MASK, unit_field,
                    processes.generation());
}

profile::Frame CPythonRuntime::code_frame(const symbolize::ImageKey& key,
                                          Image& image,
                                          uint64_t code,
                                          uint64_t unit_field,
                                          uint64_t generation)
{
  // The function's frame, at the line of its unit where the table says it.
  auto at_unit = [unit_field](const CodeFrame& known) {
    profile::Frame frame = known.frame;
    if (unit_field != 0)
      frame.line = line_in_spans(known.lines, static_cast<uint32_t>(unit_field - 1)).value_or(0);
    return frame;
  };
  const profile::Frame unread{kUnreadFrame, "", profile::FrameKind::kInterpreted};
  if (image.stalled)
    return unread;
  // What read gives, read in the stall guard; nullopt if it stalled (the image is read no more)
  // or the guard is full.
  auto guarded = [&]<class T>(std::function<T(CPythonReader&)> read) -> std::optional<T> {
    auto outcome = stall_guard_.run<T>([reader = image.reader, read] { return read(*reader); });
    if (outcome && !outcome->stalled)
      return outcome->result.get();
    if (outcome) {
      image.stalled = true;
      spdlog::warn("process {}: reading its memory stalls; its Python frames are no longer named",
                   key.pid);
    }
    return std::nullopt;
  };
  auto cached = image.codes.find(code);
  if (cached != image.codes.end()) {
    CodeFrame& known = cached->second;
    if (known.checked_generation == generation)
      return at_unit(known);
    auto name_object = guarded.operator()<std::optional<uint64_t>>(
        [code](CPythonReader& reader) { return reader.name_object(code); });
    if (!name_object)
      return unread;
    if (*name_object == known.name_object) {
      known.checked_generation = generation;
      return at_unit(known);
    }
    image.charge.shrink(known.bytes());
    image.codes.erase(cached);
  }
  auto outcome = guarded.operator()<std::optional<PythonCode>>(
      [code](CPythonReader& reader) { return reader.code(code); });
  if (!outcome)
    return unread;
  auto& read = *outcome;
  if (!read)
    return unread;
  CodeFrame named{{profile::source_name(read->name, read->filename, read->first_line), "",
                   profile::FrameKind::kInterpreted},
                  {},
                  read->first_line,
                  read->name_object,
                  generation};
  // Kept while the process's share allows; past it, read again each time it is met, and its lines
  // not at all: they are read once or never.
  if (image.codes.size() >= kMaxCodes || !image.charge.grow(named.bytes()))
    return named.frame;
  auto table = guarded.operator()<std::optional<std::string>>(
      [code](CPythonReader& reader) { return reader.line_table(code); });
  if (table && *table) {
    std::vector<LineSpan> lines = line_spans(**table, named.first_line);
    lines.shrink_to_fit();
    if (image.charge.grow(lines.capacity() * sizeof(LineSpan)))
      named.lines = std::move(lines);
  }
  return at_unit(image.codes.emplace(code, std::move(named)).first->second);
}

std::vector<runtimes::ProcessWalk> CPythonRuntime::take_process_walks()
{
  return std::exchange(walks_, {});
}

void CPythonRuntime::forget(const symbolize::ImageKey& key, bool exited)
{
  (void)exited;
  if (auto it = images_.find(key); it != images_.end() && it->second.cpython)
    walks_.push_back({key.pid, key.image_id, std::nullopt});
  images_.erase(key);
}

const FoundCPython* CPythonRuntime::found(const symbolize::ImageKey& key) const
{
  auto it = images_.find(key);
  return it != images_.end() && it->second.cpython ? &*it->second.cpython : nullptr;
}

} // namespace flamebpf::cpython
