// A CPython process's threads and the Python frames each one evaluates, read from outside through
// its memory by a verified layout (cpython_layout.h), as py-spy reads them: nothing is asked of
// the process, and nothing is written to it. Its memory is hostile: every pointer is checked before
// it is followed, every list and chain is bounded and ends where it loops, names are cut to a
// budget and made valid UTF-8, and one read of the threads has a budget of bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/process_memory.h"
#include "common/result.h"
#include "runtimes/cpython/cpython_file.h"
#include "runtimes/cpython/cpython_layout.h"

namespace flamebpf::cpython {

// What names a code object: its qualified name ("Handler.get"), its file and first line.
struct PythonCode {
  std::string name;
  std::string filename;
  uint32_t first_line = 0;
  bool cut = false; // a name was cut to kMaxNameBytes (the name ends in kTruncated)
  // The str object of its qualified name: while the code object at an address keeps it, it is the
  // same code object.
  uint64_t name_object = 0;
};

// A frame a thread evaluates: its code object, and the instruction it is at.
struct PythonFrame {
  uint64_t code = 0;
  uint32_t instruction = 0; // the code unit last begun, counted from the code's first
};

struct PythonThread {
  uint32_t native_id = 0; // the thread's id in its process's pid namespace
  bool holds_gil = false;
  std::vector<PythonFrame> frames; // innermost first
  bool frames_cut = false;         // the chain was longer than kMaxFrames, looped or broke off
};

class CPythonReader {
public:
  // The process host_pid, whose runtime state and types are at addresses.
  CPythonReader(uint32_t host_pid, const CPythonAddresses& addresses, const CPythonLayout& layout)
      : memory_(host_pid), addresses_(addresses), layout_(layout)
  {
  }

  // The threads of the process's interpreters, each with the frames it evaluates. Fails if the
  // runtime state cannot be read (the process is gone, or it is no CPython of this layout).
  [[nodiscard]] Result<std::vector<PythonThread>> threads();
  // The names of the code object at code; nullopt if it is no code object, or they cannot be
  // read or are not text.
  std::optional<PythonCode> code(uint64_t code);
  // PythonCode::name_object of the code object at code, read alone; nullopt if it is no code
  // object now.
  std::optional<uint64_t> name_object(uint64_t code);
  // The line of frame's instruction, from its code's location table (cpython_lines.h); nullopt
  // if the table does not say, or is no bytes object of at most kMaxLineTableBytes.
  std::optional<uint32_t> line(const PythonFrame& frame);
  // The location table (co_linetable) of the code object at code; nullopt if it is no code object,
  // or its table no bytes object of at most kMaxLineTableBytes.
  std::optional<std::string> line_table(uint64_t code);

  static constexpr size_t kMaxInterpreters = 16;
  static constexpr size_t kMaxThreads = 1024;
  static constexpr size_t kMaxFrames = 512;
  static constexpr size_t kMaxNameBytes = 1024;
  // A location table: about a byte or two an instruction.
  static constexpr size_t kMaxLineTableBytes = 64 << 10;
  // What one read of the threads (or of one code object's names) may take.
  static constexpr uint64_t kBytesPerRead = 1 << 20;

private:
  // The str object at address, as UTF-8 cut to kMaxNameBytes; nullopt if it is no compact str.
  std::optional<std::string> text(uint64_t address, bool& cut);
  // Whether the object at address is of type (an object whose type is a subclass of it is not).
  bool is_a(uint64_t address, uint64_t type) const;

  ProcessMemory memory_;
  CPythonAddresses addresses_;
  CPythonLayout layout_;
};

} // namespace flamebpf::cpython
