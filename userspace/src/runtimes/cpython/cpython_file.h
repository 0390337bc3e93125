// CPython in an ELF file: the interpreter's executable when it is linked whole (Debian's
// python3.11) or the libpython3.x.so it loads (a build with --enable-shared), known by the runtime
// state it exports (_PyRuntime) and told which version by the constant it exports from 3.11 on
// (Py_Version, PY_VERSION_HEX), else by the file's name. The file is a target's, so hostile: a
// forged one gets a version it cannot have refused, and a name proves nothing a layout is read by.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/elf_reader.h"
#include "common/result.h"

namespace flamebpf::cpython {

// Where CPython has what is read from outside: its runtime state, and the type objects whose
// instances are read (an object is taken for one only if its type is that type).
struct CPythonAddresses {
  uint64_t runtime = 0;    // _PyRuntime
  uint64_t code_type = 0;  // PyCode_Type
  uint64_t str_type = 0;   // PyUnicode_Type
  uint64_t bytes_type = 0; // PyBytes_Type
  // The same, moved by a load bias.
  CPythonAddresses moved_by(uint64_t bias) const
  {
    return {runtime + bias, code_type + bias, str_type + bias, bytes_type + bias};
  }
};

struct CPythonFile {
  CPythonAddresses in_file; // virtual addresses in the file
  uint32_t major = 0;
  uint32_t minor = 0;
  uint32_t micro = 0;             // 0 when the version comes from the name
  bool version_from_name = false; // no Py_Version (before 3.11): the file's name says which
  // "3.11.2", or "3.10" from a name.
  std::string version() const;
};

// The CPython in elf, found at path (as the process maps it); nullopt if elf exports no
// _PyRuntime, so is no CPython. Fails on a file that exports it with a version no CPython has, or
// none its name tells, or without the type objects.
[[nodiscard]] Result<std::optional<CPythonFile>> find_cpython(const ElfReader& elf,
                                                              std::string_view path);

} // namespace flamebpf::cpython
