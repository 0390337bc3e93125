// An ELF file's call frame information (.eh_frame, else .debug_frame) turned into the unwind rows
// of bpf_abi.h, for x86-64: for each address range, where the CFA is, where the caller's frame
// pointer was saved, and whether the frame is a PLT stub, a signal frame or the outermost one.
// The file is a target's, so hostile: the section is read against a byte budget, the rows are
// capped, every length and offset is checked, and a malformed CIE or FDE costs only its own rows
// (counted), which then fall back to the frame pointer like any code without CFI.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/elf_reader.h"
#include "common/result.h"
#include "unwind/unwind_table.h"

namespace flamebpf::unwind {

// The most of a CFI section that is read; a larger section is cut there (and counted): its FDEs
// past the cut are as if absent.
inline constexpr size_t kMaxCfiSectionBytes = 64 << 20;
// The most rows one file's table holds (16 MiB of map, a quarter of a 64 MiB host budget); FDEs
// past it are dropped (and counted), leaving their code to the frame pointer. The largest files
// measured here: libLLVM.so.19 1.2 M rows, cc1plus 517 k, JDK 25's VM library 231 k, libc.so.6 28
// k.
inline constexpr size_t kMaxCfiRows = 2 << 20;
// How deep DW_CFA_remember_state may nest; deeper, the FDE is malformed.
inline constexpr size_t kMaxCfaStateDepth = 16;

// What building one file's table met, for the stats and the one log line per file.
struct CfiCounts {
  uint64_t cfi_bytes = 0;          // bytes of the CFI section read
  uint64_t fdes = 0;               // FDEs read, malformed or not
  uint64_t fdes_malformed = 0;     // FDEs skipped because they or their CIE are malformed, and
                                   // entries whose length or id cannot be read
  uint64_t fdes_dropped = 0;       // FDEs dropped: overlapping an earlier one, outside the code,
                                   // or past kMaxCfiRows
  uint64_t rows_frame_pointer = 0; // CFI rows whose rule the sampler cannot follow (a DWARF
                                   // expression, a CFA in another register or past s16, a return
                                   // address or frame pointer saved elsewhere), left to the frame
                                   // pointer
  bool section_cut = false;        // the section was larger than kMaxCfiSectionBytes
};

// One ELF file's unwind table, shared by every process that maps a file with the same key.
struct CfiTable {
  // Rows relative to table.base_address, an ELF virtual address (the sampler adds each
  // mapping's load bias). Ends with a FB_UNWIND_FRAME_POINTER row.
  UnwindTable table;
  // Equal only for files whose tables are equal: a keyed cryptographic hash (SipHash-2-4, with a
  // key drawn at random once per process) of the CFI bytes used, the section's address and
  // format, the span of the executable load segments and every load segment's offset, address
  // and size (from which the sampler works out a mapping's load bias). Never the build ID or the
  // inode alone: a hostile container can copy a library's build ID next to garbage CFI, and its
  // table must not replace the library's in other containers.
  uint64_t content_key = 0;
  // The section the rows come from: ".eh_frame" or ".debug_frame"; "" if the file has neither
  // (then the table is one FB_UNWIND_FRAME_POINTER row).
  std::string section;
  CfiCounts counts;
};

// A CFI section's bytes and what its table depends on besides them.
struct CfiSection {
  std::string_view bytes; // the section's content, at most kMaxCfiSectionBytes of it
  uint64_t address = 0;   // its virtual address: the base of pc-relative pointers
  bool eh_frame = true;   // in .eh_frame's format, else in .debug_frame's
  // The code the FDEs may describe, [code_start, code_end): FDEs outside it are dropped (counted).
  // The table starts at code_start, or at the lowest FDE when code_end is 0 (nothing known).
  uint64_t code_start = 0;
  uint64_t code_end = 0;
  // The file's load segments, hashed into content_key only (null: none).
  const std::vector<ElfSegment>* load_segments = nullptr;
};

// Builds the table of one CFI section; content_key covers every field of cfi (the table is a
// function of them alone). Fails only when the code spans more than 4 GiB.
[[nodiscard]] Result<CfiTable> build_cfi_table(const CfiSection& cfi);

// Builds elf's unwind table from its .eh_frame, or its .debug_frame when it has no .eh_frame (a
// compressed .debug_frame is not read).
// Fails on what makes the whole file unusable: not x86-64, a CFI section that cannot be read, or
// code spanning more than 4 GiB (pc_offset is 32 bits). A malformed CIE or FDE is no failure.
[[nodiscard]] Result<CfiTable> build_cfi_table(const ElfReader& elf);

} // namespace flamebpf::unwind
