// A Go binary's pclntab as a hostile container may hold it, and the unwind rows built from it:
// whatever the bytes, every read stays inside the file, every table and chain within its step
// budget, and the rows stay sorted and end with a frame-pointer row.
// Input: byte 0's low two bits pick the layout (Go 1.2, 1.16, 1.18, 1.20); with bit 2 the rest
// is the whole table, else it is edits of a sound table of that layout, three bytes each (a 16-bit
// offset into the table and a byte xored there), so that the fuzzer works near real tables. With
// bit 3 the table lies in .data.rel.ro of a Go binary (position-independent, found by searching).
// The code holds Go's framing where the sound table's framed function adjusts its stack.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/elf_reader.h"
#include "runtimes/go/pclntab.h"
#include "runtimes/go/synthetic_pclntab.h"
#include "symbolize/synthetic_elf.h"
#include "unwind/go_table.h"

using namespace flamebpf;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  if (size == 0)
    return 0;
  auto layout = static_cast<go::PclntabLayout>(data[0] & 3);
  std::string table;
  if (data[0] & 4) {
    table.assign(reinterpret_cast<const char*>(data + 1), size - 1);
  } else {
    testing::SyntheticPclntab sound(layout, testing::SyntheticElf::kCodeOffset);
    sound.add({"main.framed", 48, {{4, 0}, {36, 24}, {8, 0}}});
    sound.add({"main.leaf", 16, {{16, 0}}});
    sound.add({"runtime.systemstack", 16, {{16, 0}}, 2});
    sound.add({"runtime.goexit", 8, {{8, 0}}, 1});
    table = sound.bytes();
    for (size_t i = 1; i + 3 <= size; i += 3) {
      size_t at = (data[i] | size_t{data[i + 1]} << 8) % table.size();
      table[at] = static_cast<char>(table[at] ^ data[i + 2]);
    }
  }
  testing::SyntheticElf elf;
  // sub rsp, 24; mov [rsp+16], rbp; lea rbp, [rsp+16]: main.framed's frame from its 4th byte.
  elf.code = "\x48\x83\xec\x18\x48\x89\x6c\x24\x10\x48\x8d\x6c\x24\x10";
  if (data[0] & 8) {
    elf.sections.emplace_back(".go.buildinfo", std::string(32, '\0'));
    elf.sections.emplace_back(".data.rel.ro", std::string(24, '\0') + table);
  } else {
    elf.sections.emplace_back(".gopclntab", table);
  }
  std::string image = elf.bytes();
  auto reader = ElfReader::open(ElfBytes::memory(image), "fuzzed");
  if (!reader)
    return 0;
  auto pclntab = go::Pclntab::open(*reader);
  if (!pclntab || !*pclntab)
    return 0;
  go::Pclntab& go = **pclntab;
  std::vector<go::PcValueRun> runs;
  std::vector<go::Pclntab::InlinedCall> calls;
  for (size_t i = 0; i < go.size(); ++i) {
    go::GoFunction function = go.function(i);
    if (function.end < function.entry)
      std::abort();
    if (go.name(i).size() > go::kMaxGoNameBytes)
      std::abort();
    runs.clear();
    if (go.stack_deltas(i, runs)) {
      for (const auto& run : runs)
        if (run.begin < function.entry || run.end > function.end || run.end <= run.begin)
          std::abort();
      if (runs.size() > go::kMaxPcValueSteps)
        std::abort();
    }
    (void)go.flags(i);
    (void)go.inline_tree(i, runs, calls);
  }
  unwind::GoRows rows = unwind::go_rows(go, *reader);
  unwind::UnwindTable cfi;
  cfi.base_address = testing::SyntheticElf::kCodeOffset;
  cfi.rows.resize(1);
  cfi.rows[0].kind = FB_UNWIND_FRAME_POINTER;
  auto merged = unwind::merge_rows(cfi, rows, 1 << 16);
  if (merged) {
    if (merged->rows.empty() || merged->rows.back().kind != FB_UNWIND_FRAME_POINTER)
      std::abort();
    for (size_t i = 1; i < merged->rows.size(); ++i)
      if (merged->rows[i - 1].pc_offset >= merged->rows[i].pc_offset)
        std::abort();
  }
  return 0;
}
