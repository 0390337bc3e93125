// A Go binary's own table of its functions (.gopclntab, the "pclntab"), which the Go runtime needs
// for its tracebacks and so keeps in stripped binaries too: each function's entry and name, and
// its pc-value tables (the stack pointer's distance from the entry's at each pc, "pcsp", and which
// inlined call each pc belongs to). Layouts: Go 1.2 (to 1.15), 1.16, 1.18 and 1.20 (unchanged
// since), as runtime/symtab.go and debug/gosym describe them.
//
// The binary is a target's, so hostile. It is read with pread in bounded windows (never mapped: a
// container that truncates it cannot fault flamebpf), and only the function table is held; every
// offset is checked against the table's bounds, every pc-value table and inline chain has a step
// budget, and a function whose record is malformed is skipped (counted), never trusted.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/elf_reader.h"
#include "common/result.h"

namespace flamebpf::go {

enum class PclntabLayout { kGo12, kGo116, kGo118, kGo120 };

// Functions read at most; the largest Go programs have about 200k.
inline constexpr size_t kMaxGoFunctions = 1 << 20;
// A function's name longer than this is cut (Go's longest generic instantiations are a few KiB).
inline constexpr size_t kMaxGoNameBytes = 4096;
// Steps of one pc-value table; a function of 64 KiB of code changes its values far less often.
inline constexpr size_t kMaxPcValueSteps = 1 << 16;
// Inlined calls followed out of one pc; Go inlines a few levels deep.
inline constexpr size_t kMaxGoInlineDepth = 32;

struct GoFunction {
  uint64_t entry = 0; // virtual address of its first instruction
  uint64_t end = 0;   // the next function's entry, or the end of the text
};

// One run of a pc-value table: value holds for [begin, end).
struct PcValueRun {
  uint64_t begin = 0;
  uint64_t end = 0;
  int32_t value = 0;
};

class Pclntab {
public:
  // The pclntab of elf: its .gopclntab section (.data.rel.ro.gopclntab in a position-independent
  // binary), else the table whose header is found in the .data.rel.ro of a position-independent
  // Go binary linked by the system's linker, or (section headers stripped) in a read-only load
  // segment. nullopt if elf is no Go binary; an error if its table is malformed or, in a Go
  // binary, not found. elf's bytes must outlive this.
  [[nodiscard]] static Result<std::optional<Pclntab>> open(const ElfReader& elf);

  PclntabLayout layout() const { return layout_; }
  // "Go 1.20+" and so on, for messages.
  std::string_view layout_name() const;
  size_t size() const { return functions_.size(); }
  GoFunction function(size_t index) const;
  // The function that holds address, if any.
  std::optional<size_t> find(uint64_t address) const;
  // The function's name ("main.(*Server).handle"), "" if unreadable.
  std::string name(size_t index);
  // The same with where it starts in the name table; nullopt if the record is unreadable.
  struct FunctionName {
    uint64_t offset = 0;
    std::string text;
  };
  std::optional<FunctionName> function_name(size_t index);
  // Where the name table is in the file, and the bytes readable from there (to the table's end).
  std::pair<uint64_t, uint64_t> name_table() const
  {
    return {names_, names_ <= end_ ? end_ - names_ : 0};
  }
  // The runs of the function's stack-pointer delta: bytes the function has pushed or reserved
  // below the sp it was entered with (the return address not counted). False if the table is
  // malformed or the function's record unreadable.
  bool stack_deltas(size_t index, std::vector<PcValueRun>& runs);
  // Whether the function ends every stack (runtime.goexit, runtime.mstart, runtime.rt0_go), and
  // whether it moves the stack pointer in ways its pcsp table cannot say (stack switches), so
  // that no unwinding can pass it. Go 1.18+ say so in the record; before, the three roots are
  // known by name and stack switches not at all.
  struct Flags {
    bool top_frame = false;
    bool sp_write = false;
  };
  std::optional<Flags> flags(size_t index);
  // Both from one read of the function's record: its flags, and its stack-pointer runs in runs;
  // nullopt where stack_deltas would say false.
  std::optional<Flags> frame(size_t index, std::vector<PcValueRun>& runs);
  // One call inlined into a function: its name, and the call it was inlined into (an index in the
  // same tree), -1 if the function itself.
  struct InlinedCall {
    std::string name;
    int32_t parent = -1;
  };
  // The function's inline tree, as far as its pcs refer to it (calls[i] is the tree's entry i,
  // empty where unused), and the runs of its pcs' index in it (-1: in no inlined call). False if
  // the function has no inline tree or it cannot be found (Go 1.2-1.15 records do not say where;
  // a position-independent Go 1.18+ binary's module data is found through its .rela.dyn).
  bool inline_tree(size_t index, std::vector<PcValueRun>& runs, std::vector<InlinedCall>& calls);
  // Functions skipped because their records were malformed.
  uint64_t malformed() const { return malformed_; }
  // Lets go of the bytes of the windows reads go through (later reads fill them again): a table
  // kept for later reads holds only its function table meanwhile.
  void release_windows();
  // The function table's bytes.
  size_t memory_bytes() const { return functions_.capacity() * sizeof(Entry); }

private:
  // A function's record (_func): the fields this reader uses.
  struct Record {
    uint64_t name_offset = 0; // in the name table
    uint64_t pcsp = 0;        // in the pc-value tables
    uint32_t pcdata_count = 0;
    uint32_t funcdata_count = 0;
    uint64_t pcdata_at = 0;      // file offset of its pcdata offsets (4 bytes each)
    uint64_t funcdata_at = 0;    // file offset of its funcdata (4 bytes, or a pointer before 1.18)
    std::optional<uint8_t> flag; // funcFlag, Go 1.18+
  };
  struct Entry {
    uint32_t entry_offset; // from text_start_
    uint32_t record_offset;
  };

  explicit Pclntab(const ElfReader& elf) : elf_(&elf) {}
  // The first table whose header checks, at an 8-byte boundary of the size bytes at file offset
  // (virtual address vaddr).
  static std::optional<Pclntab>
  search(const ElfReader& elf, uint64_t offset, uint64_t vaddr, uint64_t size);
  Result<> read_header(uint64_t start, uint64_t size);
  Result<> read_function_table();
  std::optional<Record> record(size_t index);
  Flags flags_of(const Record& record);
  bool decode(size_t index, uint64_t table, std::vector<PcValueRun>& runs, uint64_t stop_after);
  // The string at offset in the name table.
  std::string string_at(uint64_t offset);
  // Where the inline trees' funcdata offsets count from (Go 1.18+: the go:func.* symbol).
  std::optional<uint64_t> funcdata_base();
  // The same from the dynamic relocations that fill a position-independent binary's module data.
  std::optional<uint64_t> relocated_funcdata_base(size_t gofunc_word);
  // Each R_X86_64_RELATIVE relocation of the binary (within a byte budget): visit(where, value).
  template <class Visit> void each_relative_relocation(Visit&& visit) const;
  // The values relocations write at the virtual addresses at (found[i] for at[i]), where any do.
  void relocated_words(const std::vector<uint64_t>& at,
                       std::vector<std::optional<uint64_t>>& found) const;
  // Bytes at file offset, within the table's bounds (or within limit, for reads outside it);
  // the view lives until the next read.
  std::optional<std::string_view> read(uint64_t offset, size_t length);
  std::optional<std::string_view> read_anywhere(uint64_t offset, size_t length);
  uint64_t word(std::string_view bytes, size_t at) const;

  const ElfReader* elf_;
  PclntabLayout layout_ = PclntabLayout::kGo120;
  uint8_t pc_quantum_ = 1;
  uint8_t pointer_size_ = 8;
  uint64_t start_ = 0; // file offset of the table
  uint64_t end_ = 0;   // file offset past it
  uint64_t vaddr_ = 0; // its virtual address
  uint64_t text_start_ = 0;
  uint64_t names_ = 0;     // file offset of the function name table
  uint64_t pc_tables_ = 0; // file offset of the pc-value tables
  uint64_t records_ = 0;   // file offset the records' offsets count from
  uint64_t text_end_ = 0;
  std::vector<Entry> functions_;
  uint64_t malformed_ = 0;
  bool funcdata_base_tried_ = false;
  std::optional<uint64_t> funcdata_base_;
  // The windows reads go through, moving pieces of the file: the table's parts (records, names,
  // pc-value tables, inline trees) are each read mostly in order, but in turns, and one window
  // would move, and be read again, at every turn. A miss replaces the window used longest ago.
  struct Window {
    std::string bytes;
    uint64_t at = 0;
    uint64_t last_use = 0;
  };
  static constexpr size_t kWindows = 8;
  std::array<Window, kWindows> windows_;
  uint64_t uses_ = 0;
};

} // namespace flamebpf::go
