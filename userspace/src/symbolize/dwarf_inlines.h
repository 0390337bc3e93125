// The functions a compiler inlined into others, read from an ELF file's DWARF (.debug_info and
// the sections it points into) by flamebpf's own bounded reader: every section is read with pread
// through ElfReader against a budget fixed here, .debug_info one unit at a time, zlib-compressed
// sections inflated in steps, and no other file is ever opened (no split DWARF .dwo, no
// .gnu_debugaltlink), since a target's files are hostile. Only what names inlined frames is kept:
// the address ranges of each inlined call, by nesting depth, and the names of the inlined
// functions, so a lookup is a few binary searches.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/elf_reader.h"
#include "common/result.h"
#include "dwarf/section_stream.h"

namespace flamebpf::symbolize {

// Everything one build holds at once, whatever the file: the unit being read, the windows kept
// over side sections and their inflate state, the side sections held whole, the raw names, and
// the index under construction. flamebpf's whole process aims at 30 MiB resident, and builds run
// inside it; past this, no further unit is read and the index holds the units read so far.
inline constexpr size_t kMaxInlineBuildBytes = 24 << 20;
// .debug_info as read (after inflating), streamed in steps: a JDK's VM library's is about 250 MB,
// and a gigabyte of it would take seconds of background CPU, which is as far as a build may go.
inline constexpr uint64_t kMaxDebugInfoBytes = 1ull << 30;
// One unit (compile unit) held at once; larger ones are skipped and counted. LTO units of large
// C++ programs reach a few MiB; a third of the build's budget.
inline constexpr size_t kMaxDwarfUnitBytes = 8 << 20;
// The largest size a side section may state. .debug_str, .debug_line_str, .debug_abbrev,
// .debug_ranges and .debug_rnglists are read through a window that moves forward (pread on
// demand, or inflating in steps), never held whole; that library's inflate to 5-10 MB each.
inline constexpr uint64_t kMaxDwarfSectionBytes = 64 << 20;
// .debug_str_offsets and .debug_addr, read at random by index, are held whole, up to this each
// (the table of one large clang program is a few MiB); larger ones are not read.
inline constexpr size_t kMaxHeldSectionBytes = 4 << 20;
// A window over a side section holds at most this much besides the bytes asked for at once.
using dwarf::kMaxWindowBytes;
// The index built, at most (it is what stays after the build; a part of kMaxInlineBuildBytes).
inline constexpr size_t kMaxInlineIndexBytes = 16 << 20;
// Inlined calls nested deeper than this inside one function are left out and counted (glibc
// nests 7 deep, heavy C++ templates a few dozen).
inline constexpr size_t kMaxInlineDepth = 64;
// An inlined function's name, demangled, is cut at this many bytes (elf_symbols.h's
// kMaxSymbolNameBytes, the budget of the real function's name).
inline constexpr size_t kMaxInlineNameBytes = 4096;
// DIEs nested deeper than this (whatever their tags) are read, to stay in step, but not looked at.
inline constexpr size_t kMaxDieNesting = 256;
// Ranges read from one range list (.debug_ranges, .debug_rnglists); the rest are counted.
inline constexpr size_t kMaxRangesPerList = 16384;
// DW_AT_abstract_origin and DW_AT_specification links followed to find a name.
inline constexpr size_t kMaxNameHops = 8;
// One build's CPU on a background thread: reading stops after this long (the VM library's 150 MB of
// .debug_info takes a few seconds), and demangling after kMaxDemanglingTime, leaving the rest of
// the names mangled (a hostile file can hold thousands of names that each take the demangler's
// whole time budget).
inline constexpr std::chrono::seconds kMaxInlineBuildTime{30};
inline constexpr std::chrono::seconds kMaxDemanglingTime{2};

class InlineIndex {
public:
  // Builds the index of the functions inlined into others, as the DWARF of reader (the ELF file
  // itself, or its separate debug file) describes them. bias is added to every DWARF address to
  // make it the address of the ELF file whose code runs (debug files keep the file's addresses;
  // elf_symbols.cpp's bias_between() computes it, usually 0). Fails (one message naming
  // reader.shown()) when the file has no usable .debug_info (none, NOBITS, zstd-compressed,
  // unreadable, or no .debug_abbrev); what budgets cut or malformed parts skip is added to
  // problems, one phrase each, and the index still holds what was read.
  // budget_bytes (kMaxInlineBuildBytes unless a test asks for less) bounds what the build holds at
  // once; when it is reached no further unit is read, a problem says so, and the index holds the
  // units read before, each whole. Once cancelled turns true, the build fails before its next
  // unit.
  [[nodiscard]] static Result<std::unique_ptr<InlineIndex>>
  build(const ElfReader& reader,
        uint64_t bias,
        std::vector<std::string>& problems,
        size_t budget_bytes = kMaxInlineBuildBytes,
        const std::atomic<bool>* cancelled = nullptr);

  struct Inlined {
    std::string_view name; // demangled; points into the index, valid while it lives
    bool cut;              // a budget shortened the name: it ends in kTruncated (name_cut.h)
  };
  // The functions inlined at the link-time address (the space of ELF symbol values), outermost
  // first: the first is the callee that the real function (which ELF symbols name) inlined, the
  // last the innermost. Names are demangled, DW_AT_linkage_name preferred over DW_AT_name. Empty if
  // the address is in no inlined code; at most kMaxInlineDepth entries. A few binary searches.
  std::vector<Inlined> at(uint64_t address) const;

  // Roughly the bytes the index holds.
  size_t memory_bytes() const;
  // The address ranges held, all depths together.
  size_t ranges() const;
  // Inlined ranges left out because another range of the same depth already covered their start.
  // Normal for C++ (the same inline function's COMDAT or folded copies described by several
  // units), so counted here rather than reported as a problem.
  size_t overlaps_dropped() const { return overlaps_dropped_; }
  // Units of .debug_info read, and the share of .debug_info's (inflated) bytes they and the
  // units passed over span: below 1 when a budget or the time stopped the build early.
  size_t units_read() const { return units_read_; }
  double info_fraction_read() const { return info_fraction_read_; }

  // One address range of one inlined call. Passive data, public for the builder in the .cpp.
  struct Range {
    uint64_t begin = 0;
    uint32_t length = 0;
    uint32_t name = 0;   // index in names_
    uint32_t call = 0;   // which inlined call (DIE) this range is of, from 1
    uint32_t caller = 0; // the inlined call it is nested in, 0 at depth 1
  };
  struct Name {
    uint32_t offset = 0; // in text_
    uint32_t length = 0;
    bool cut = false;
  };

private:
  friend class InlineIndexBuilder;
  InlineIndex() = default;
  // Makes ranges (taken) the index's, sorted by depth and address, dropping those that overlap
  // an earlier one of their depth; returns how many were dropped.
  size_t lay_out(std::vector<Range>& ranges, const std::function<uint32_t(const Range&)>& depth_of);

  // The ranges of depth d are ranges_[depth_begin_[d - 1], depth_begin_[d]), sorted by begin,
  // never overlapping: one array, so that the build sorts it in place.
  std::vector<Range> ranges_;
  std::vector<uint32_t> depth_begin_;
  std::vector<Name> names_;
  std::string text_; // every name once, one after the other
  size_t overlaps_dropped_ = 0;
  size_t units_read_ = 0;
  double info_fraction_read_ = 0;
};

} // namespace flamebpf::symbolize
