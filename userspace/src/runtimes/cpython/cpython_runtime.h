// CPython as a runtime (runtimes/runtime.h): found in a process image by the interpreter it maps,
// its executable when linked whole (Debian's python3.11) or the libpython3.x.so a build with
// --enable-shared loads, with or without symbols, by the runtime state it exports
// (cpython_file.h). What it learns per image is the interpreter's addresses there and its
// version's layout (cpython_layout.h), which the reads of its threads and frames go by.
//
// Its frames are the markers the frame walk leaves (bpf/runtimes/cpython_abi.h), each a code
// object's address and the code unit the frame was at, named "qualified.name (file.py:first
// line)": one frame per function, whatever line it is at, so that a function's time is not split
// by its lines in a flame graph. The line it was at is the frame's line (profile::Frame::line),
// for pprof, from the code object's location table. Each code object's names and lines are read
// once, charged to the process's target (one it cannot keep is named anew each time, without its
// lines); at each generation the object at the address is checked to be the same code object (a
// freed one's address may hold another's).
//
// A version without a layout checked against a real interpreter is said once ("CPython 3.14:
// frames not named, layout not verified") and never read with a guessed one; from 3.13, a build
// whose own _Py_DebugOffsets say otherwise than the verified layout (debug_offsets.h) is said once
// per file and not read. A file that exports
// the runtime state with nothing of CPython's behind it (a forged interpreter) is said once per
// file and read no further: the process's native frames are named as any.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/memory_account.h"
#include "common/stall_guard.h"
#include "runtimes/cpython/cpython_file.h"
#include "runtimes/cpython/cpython_layout.h"
#include "runtimes/cpython/cpython_lines.h"
#include "runtimes/cpython/cpython_reader.h"
#include "runtimes/runtime.h"
#include "symbolize/process_table.h"

namespace flamebpf::cpython {

// Whether a mapped file's name is an interpreter's: python, python3.11, libpython3.11.so.1.0.
bool is_cpython_file_name(std::string_view path);

// Whether the frame fields the walk reads lie in the span it reads from the code object's field
// (FB_CPYTHON_FRAME_SPAN): a layout whose fields do not is not walked.
bool fits_frame_span(const CPythonLayout& layout);

// A CPython found in one process image.
struct FoundCPython {
  CPythonFile file;
  CPythonLayout layout;
  CPythonAddresses in_process; // the file's addresses moved by its load bias
};

class CPythonRuntime final : public runtimes::Runtime {
public:
  std::string_view name() const override { return "CPython"; }
  void captured(symbolize::ProcessTable& processes,
                const symbolize::ImageKey& key,
                const symbolize::ProcessImage& image,
                const std::vector<procfs::Mapping>& mappings) override;
  // Python's code is no machine code of its own: its frames are the markers the unwinder leaves.
  std::optional<runtimes::NamedCode> name_code(symbolize::ProcessTable& processes,
                                               const symbolize::ImageKey& key,
                                               uint64_t address,
                                               bool anonymous) override;
  std::optional<profile::Frame> name_marker(symbolize::ProcessTable& processes,
                                            const symbolize::ImageKey& key,
                                            uint64_t frame) override;
  void forget(const symbolize::ImageKey& key, bool exited) override;
  std::vector<runtimes::ProcessWalk> take_process_walks() override;

  // The CPython key's image runs, with a verified layout; nullptr if none.
  const FoundCPython* found(const symbolize::ImageKey& key) const;

  // Files known to hold no CPython flamebpf reads (refused, or of an unverified version), each
  // opened and said once; past this many, more are opened each time and said in the verbose log
  // only, so that a host of forged files costs bounded memory.
  static constexpr size_t kMaxFilesPassed = 4096;
  // Code objects whose names one process keeps, at most.
  static constexpr size_t kMaxCodes = 65536;
  // A frame whose code object cannot be read.
  static constexpr const char* kUnreadFrame = "[unread Python frame]";

private:
  // One code object's frame, and what tells it is still there.
  struct CodeFrame {
    profile::Frame frame;
    std::vector<LineSpan> lines; // from co_linetable; empty if not read
    uint32_t first_line = 0;
    uint64_t name_object = 0;
    uint64_t checked_generation = 0; // the generation it was last found the same in
    // What it keeps, charged to its process's target.
    uint64_t bytes() const
    {
      return heap_bytes(frame.name) + lines.capacity() * sizeof(LineSpan) + sizeof(CodeFrame);
    }
  };
  struct Image {
    std::optional<FoundCPython> cpython;
    std::set<std::string> files_tried; // the interpreter files it maps (file_identity), once each
    std::shared_ptr<CPythonReader> reader; // with cpython; shared with the reads in the guard
    std::unordered_map<uint64_t, CodeFrame> codes; // by code object address
    MemoryCharge charge;  // codes' names and lines, to the process's target
    bool stalled = false; // a read of its memory stalled: no more
  };
  // The frame of the code object at code, at code unit unit_field - 1 (0: at no known unit), read
  // through image's reader (in the stall guard).
  profile::Frame code_frame(const symbolize::ImageKey& key,
                            Image& image,
                            uint64_t code,
                            uint64_t unit_field,
                            uint64_t generation);
  // Opens the interpreter file behind mapping and finds its CPython; one line if it cannot.
  void try_file(symbolize::ProcessTable& processes,
                const symbolize::ImageKey& key,
                const procfs::Mapping& mapping,
                Image& image,
                const symbolize::ProcessImage& captured_image);
  // Notes a file that holds no CPython flamebpf reads; whether it is the first time, and a line
  // about it may be said.
  bool pass_file(const std::string& identity);

  std::unordered_map<symbolize::ImageKey, Image, symbolize::ImageKeyHash> images_;
  std::set<std::string> versions_said_;      // unverified versions, "3.13", said once each
  std::set<std::string> files_passed_;       // by file_identity
  std::vector<runtimes::ProcessWalk> walks_; // changed since take_process_walks
  // A container's file system may not answer: the interpreter's file is read off this thread.
  StallGuard stall_guard_{std::chrono::milliseconds(1000)};
};

} // namespace flamebpf::cpython
