// The function symbols of one ELF file, read once: their addresses into flamebpf's own memory, 16
// bytes each, and their names where the table found them. Names in a file (the ELF file's string
// table, its debug file's, a Go binary's name table) stay there and are read the first time a frame
// needs one, through one descriptor the table holds: most names are never needed, and they were two
// thirds of a table's memory. A name read later must be the name first read (a keyed hash of it is
// kept), so a file changed since, or a copy that another container changed, names nothing wrongly.
// The file is never mapped. The symbols come from whichever table is richest: the file's .symtab if
// it has one; else its .dynsym, the .symtab of its separate debug file (debug_files.h), or its
// .dynsym with the MiniDebugInfo of .gnu_debugdata (whose names are held in memory, as are a
// vDSO's). Every read has a byte budget; a name cut by one ends in kTruncated (name_cut.h).
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
#include "common/read_record.h"
#include "common/result.h"
#include "common/stall_guard.h"
#include "common/unique_fd.h"
#include "symbolize/debug_files.h"
#include "symbolize/demangle.h"
#include "symbolize/dwarf_inlines.h"
#include "symbolize/go_inlines.h"
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
    // The functions the compiler inlined at the byte, outermost first: a Go binary's from its
    // pclntab, another file's once its inline index is built (use_inlines); they live until the
    // next lookup.
    std::vector<InlineIndex::Inlined> inlined;
  };
  // The function covering the byte at file_offset, with the byte's offset into it. A name still in
  // the file is read there, in guard if given (a target's file can stall); nullopt if it cannot be
  // read now, or no longer is the name first read (names_changed).
  std::optional<SymbolMatch> match_file_offset(uint64_t file_offset,
                                               StallGuard* guard = nullptr) const;

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
  // Forgets the demangled names no lookup used since the last call, but those a budget cut (each
  // counted once): a name a frame met once is not held for as long as the file is.
  void forget_unused_names() const;
  // Whether a name read from the file was not the name first read: the file changed, and its
  // table is to be read again.
  bool names_changed() const { return names_changed_; }
  // The file, as messages name it.
  const std::string& shown() const { return shown_; }

  // Whether other names every byte as this does: the same segments, symbols, names, build ID and
  // source (copies of one file in several containers' images, each its own file to the kernel).
  bool names_alike(const ElfSymbols& other) const;
  // A hash of what names_alike compares, keyed so that a target cannot choose a collision.
  uint64_t content_hash() const;
  // What was read of the file to make the table, when its bytes alone made it (its own .symtab,
  // no Go inline tree read later): another file that replays it is a copy, named by this table
  // without being read (ElfCache). Null otherwise: a stripped file's table depends on the debug
  // files its root holds.
  std::shared_ptr<const ReadRecord> reads() const { return reads_; }

  // A function symbol as held.
  struct Symbol {
    uint32_t address; // link-time address in the ELF file, less base_address_
    uint32_t size;    // 0: unknown, the symbol extends to the next one
    uint32_t name;    // where its name starts, in names_ or the name file
    uint32_t check;   // a keyed hash of the name's first kMaxSymbolNameBytes bytes, as first read
  };
  // Function symbols and their names, as read from one or two tables.
  struct Table {
    struct Entry {
      uint64_t address;
      uint64_t size;
      uint32_t name;
      uint32_t check;
    };
    std::vector<Entry> symbols;
    std::string names; // each name ended by a NUL; empty if they are in name_file
    // Where the names are in a file, if they are: its descriptor, the offset names count from, and
    // the bytes readable from there.
    struct NameFile {
      UniqueFd fd;
      uint64_t at = 0;
      uint64_t size = 0;
    };
    std::shared_ptr<const NameFile> name_file;
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
  // The symbol's name as stored, up to kMaxSymbolNameBytes + 1 bytes of it, checked; nullopt if it
  // cannot be read now or is not the name first read.
  std::optional<std::string> stored_name(const Symbol& symbol, StallGuard* guard) const;

  struct Segment {
    uint64_t offset;
    uint64_t file_size;
    uint64_t vaddr;
  };
  std::vector<Segment> segments_;
  uint64_t base_address_ = 0; // the lowest load segment's; symbols' addresses count from it
  std::vector<Symbol> symbols_;
  std::string names_;
  std::shared_ptr<const Table::NameFile> name_file_;
  uint64_t names_cut_ = 0;
  struct CachedName {
    Demangled name;
    bool used = true; // looked up since the last forget_unused_names()
  };
  // What a cached name costs: its node and bucket, and its text's own block (heap_bytes).
  static size_t cached_name_bytes(const Demangled& name);
  // Demangled names by name offset, made on lookup.
  mutable std::unordered_map<uint32_t, CachedName> demangled_;
  mutable size_t demangled_bytes_ = 0;
  mutable uint64_t demangled_cut_ = 0;
  // Reads of the name file, one at a time.
  mutable GuardedReads<std::string> name_reads_;
  mutable bool names_changed_ = false;
  std::string shown_;
  std::string build_id_;
  std::string symbols_from_;
  std::shared_ptr<ReadRecord> reads_;
  std::vector<std::string> problems_;
  // Set on the thread that reads the symbols, taken and given by the one that names frames.
  mutable std::optional<InlineSource> inline_source_;
  mutable std::shared_ptr<const InlineIndex> inlines_;
  // A Go binary without DWARF: its inlined calls, read from its pclntab as frames need them.
  std::unique_ptr<GoInlineTree> go_inlines_;
  mutable bool inlines_pending_ = false;
};

} // namespace flamebpf::symbolize
