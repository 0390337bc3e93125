// Symbols of one ELF file through elfutils' libdwfl: .symtab or .dynsym, plus separate debug files
// found by build ID or .gnu_debuglink, and MiniDebugInfo.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"

namespace flamebpf::symbolize {

class ElfSymbols {
public:
  ~ElfSymbols();
  ElfSymbols(const ElfSymbols&) = delete;
  ElfSymbols& operator=(const ElfSymbols&) = delete;

  // Opens the ELF file fd (ownership taken). path is where the file sits as seen from this
  // process (e.g. /proc/<pid>/root/usr/lib/libc.so.6), used to find .gnu_debuglink files beside
  // it; debug_root is the root under which /usr/lib/debug is searched by build ID.
  // Symbol tables are read immediately, so the file's process may exit afterwards.
  [[nodiscard]] static Result<std::unique_ptr<ElfSymbols>>
  open(UniqueFd fd, const std::string& path, const std::string& debug_root);

  struct SymbolMatch {
    std::string name; // demangled
    uint64_t offset;  // of the looked-up byte from the symbol's start
  };
  // The function covering the byte at file_offset, with the byte's offset into it.
  std::optional<SymbolMatch> match_file_offset(uint64_t file_offset) const;

  // The name of the function covering the byte at file_offset in the file, demangled; nullopt if
  // no symbol covers it.
  std::optional<std::string> symbolize_file_offset(uint64_t file_offset) const;

  // Hex GNU build ID, or empty.
  const std::string& build_id() const { return build_id_; }

private:
  ElfSymbols() = default;
  // Link-time virtual address of file_offset, from the PT_LOAD program headers.
  std::optional<uint64_t> file_offset_to_vaddr(uint64_t file_offset) const;

  // Function symbols sorted by address: libdwfl's own address lookup scans the whole table, too
  // slow for a profile's millions of frames.
  struct Symbol {
    uint64_t address; // in libdwfl's address space (link-time address + bias)
    uint64_t size;    // 0: unknown, the symbol extends to the next one
    const char* name; // in the ELF string table, alive as long as the session
  };
  const Symbol* find_symbol(uint64_t address) const;

  struct Session;
  std::unique_ptr<Session> session_;
  std::vector<Symbol> symbols_;
  mutable std::unordered_map<const char*, std::string> demangled_;
  std::string build_id_;
};

// Demangles an Itanium C++ ABI name; other names are returned as they are.
std::string demangle(const char* name);

} // namespace flamebpf::symbolize
