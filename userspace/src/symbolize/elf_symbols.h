// The function symbols of one ELF file, read once into flamebpf's own memory: the file and any
// debug file are closed before open() returns, so a cached file holds no mapping, and no
// descriptor once its inline index (which names inlined functions from DWARF) is built. The symbols
// come from whichever table is richest: the file's .symtab if it has one; else its .dynsym, the
// .symtab of its separate debug file (debug_files.h), or its .dynsym with the MiniDebugInfo of
// .gnu_debugdata. Every read has a byte budget; a name cut by one ends in kTruncated (name_cut.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/elf_reader.h"
#include "common/result.h"
#include "common/unique_fd.h"
#include "symbolize/debug_files.h"
#include "symbolize/demangle.h"
#include "symbolize/dwarf_inlines.h"
#include "symbolize/inline_indexer.h"

namespace flamebpf::symbolize {

class DebugFetcher;

// Budgets of what is read from one ELF file (and its debug file), each: symbol tables (read in
// small steps; 2.8 million 64-bit entries), string tables (held while the table is read), a name.
inline constexpr size_t kMaxSymbolTableBytes = 64 << 20;
inline constexpr size_t kMaxStringTableBytes = 64 << 20;
inline constexpr size_t kMaxSymbolNameBytes = 4096;
// MiniDebugInfo: .gnu_debugdata as stored (xz), decompressed, and the xz decoder's memory.
inline constexpr size_t kMaxDebugDataBytes = 8 << 20;
inline constexpr size_t kMaxMiniDebugInfoBytes = 32 << 20;
inline constexpr uint64_t kMaxXzDecoderBytes = 24 << 20;

class ElfSymbols {
public:
  ~ElfSymbols();
  ElfSymbols(const ElfSymbols&) = delete;
  ElfSymbols& operator=(const ElfSymbols&) = delete;

  // Reads the symbols of the ELF file fd (closed on return). path is the file's path inside its
  // root, as /proc/<pid>/maps shows it, for the .gnu_debuglink lookup; debug_roots are searched
  // for its debug file, in order. shown names the file in messages.
  // Where no debug root has it, the debug file is asked of fetcher (if given) by build ID.
  [[nodiscard]] static Result<std::unique_ptr<ElfSymbols>>
  open(UniqueFd fd,
       const std::string& path,
       const std::vector<DebugRoot>& debug_roots,
       const std::string& shown,
       DebugFetcher* fetcher = nullptr);

  // Reads the dynamic symbols of an ELF image in flamebpf's own memory (its vDSO's).
  [[nodiscard]] static Result<std::unique_ptr<ElfSymbols>> read_image(std::string_view image,
                                                                      const std::string& shown);

  struct SymbolMatch {
    std::string name; // demangled, at most kMaxSymbolNameBytes or kMaxDemangledBytes
    uint64_t offset;  // of the looked-up byte from the symbol's start
    bool cut = false; // a budget cut the name (when read or demangled): it ends in kTruncated
    // The functions the compiler inlined at the byte, outermost first, once the file's inline
    // index is built (use_inlines); they live as long as this ElfSymbols.
    std::vector<InlineIndex::Inlined> inlined;
  };
  // The function covering the byte at file_offset, with the byte's offset into it.
  std::optional<SymbolMatch> match_file_offset(uint64_t file_offset) const;

  // Where the file's DWARF is (its own .debug_info, or its debug file's), if it has any, for its
  // inline index to be built off the report cycle; taken once.
  std::optional<InlineSource> take_inline_source() const
  {
    return std::exchange(inline_source_, {});
  }
  // From now on, lookups name the inlined functions index holds.
  void use_inlines(std::shared_ptr<const InlineIndex> index) const
  {
    inlines_ = std::move(index);
    inlines_pending_ = false;
  }
  bool has_inlines() const { return inlines_ != nullptr; }
  // Whether an inline index is being built for the file: until it is given, a lookup's inlined
  // functions are missing, and the frame is worth naming again later.
  bool inlines_pending() const { return inlines_pending_; }
  void set_inlines_pending(bool pending) const { inlines_pending_ = pending; }

  // The name of the function covering the byte at file_offset in the file, demangled; nullopt if
  // no symbol covers it.
  std::optional<std::string> symbolize_file_offset(uint64_t file_offset) const;

  // Hex GNU build ID, or empty.
  const std::string& build_id() const { return build_id_; }
  // Where the symbols came from: ".symtab", ".dynsym", ".gnu_debugdata", or the debug file's path
  // inside its root.
  const std::string& symbols_from() const { return symbols_from_; }
  // What budgets cut and which debug files were refused while reading, one phrase each.
  const std::vector<std::string>& problems() const { return problems_; }
  // The number of function symbols held.
  size_t symbol_count() const { return symbols_.size(); }
  // Names cut by a budget so far: when read, or when demangled.
  uint64_t names_cut() const { return names_cut_ + demangled_cut_; }
  // The memory the symbols hold, roughly; the inline index, which files of one build ID share, is
  // not counted.
  size_t memory_bytes() const;

  // Whether other names every byte as this does: the same segments, symbols, names, build ID and
  // source (copies of one file in several containers' images, each its own file to the kernel).
  bool names_alike(const ElfSymbols& other) const;
  // A hash of what names_alike compares, keyed so that a target cannot choose a collision.
  uint64_t content_hash() const;

  // A function symbol, its name in names_.
  struct Symbol {
    uint64_t address;     // link-time address in the ELF file
    uint64_t size;        // 0: unknown, the symbol extends to the next one
    uint32_t name_offset; // in names_
    uint16_t name_size;
    bool name_cut; // longer than kMaxSymbolNameBytes: cut, and ending in kTruncated
  };
  // Function symbols and their names, as read from one or two tables.
  struct Table {
    std::vector<Symbol> symbols;
    std::string names;
    uint64_t names_cut = 0;
  };

private:
  ElfSymbols() = default;
  // Symbols of none yet, with the image's load segments and build ID.
  static std::unique_ptr<ElfSymbols> of_image(const ElfReader& reader);
  // Holds table's symbols, sorted, as this file's.
  void keep(Table table);
  // Link-time virtual address of file_offset, from the PT_LOAD program headers.
  std::optional<uint64_t> file_offset_to_vaddr(uint64_t file_offset) const;
  // The symbol covering address, by binary search (sorted by address).
  const Symbol* find_symbol(uint64_t address) const;

  struct Segment {
    uint64_t offset;
    uint64_t file_size;
    uint64_t vaddr;
  };
  std::vector<Segment> segments_;
  std::vector<Symbol> symbols_;
  std::string names_;
  uint64_t names_cut_ = 0;
  // Demangled names by name offset, made on first lookup.
  mutable std::unordered_map<uint32_t, Demangled> demangled_;
  mutable uint64_t demangled_cut_ = 0;
  std::string build_id_;
  std::string symbols_from_;
  std::vector<std::string> problems_;
  // Set on the thread that reads the symbols, taken and given by the one that names frames.
  mutable std::optional<InlineSource> inline_source_;
  mutable std::shared_ptr<const InlineIndex> inlines_;
  mutable bool inlines_pending_ = false;
};

} // namespace flamebpf::symbolize
