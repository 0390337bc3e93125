#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <string>

#include "common/elf_reader.h"
#include "go_splits.h"
#include "runtimes/go/pclntab.h"
#include "runtimes/go/synthetic_pclntab.h"
#include "runtimes/go_abi.h"
#include "symbolize/synthetic_elf.h"
#include "unwind/go_table.h"

namespace flamebpf::unwind {
namespace {

struct GoBinary {
  std::string bytes;
  std::optional<ElfReader> elf;
  std::optional<go::Pclntab> table;
};

// The noinline split workload of the first Go toolchain tests/progs/go/make-go-splits.sh used.
void load(GoBinary& binary)
{
  auto versions = testing::go_split_versions();
  ASSERT_FALSE(versions.empty());
  std::ifstream file(testing::go_split(versions.front(), "split.noinline.stripped"),
                     std::ios::binary);
  std::stringstream content;
  content << file.rdbuf();
  binary.bytes = content.str();
  auto elf = ElfReader::open(ElfBytes::memory(binary.bytes), "split");
  ASSERT_TRUE(elf);
  binary.elf.emplace(std::move(*elf));
  auto table = go::Pclntab::open(*binary.elf);
  ASSERT_TRUE(table && *table);
  binary.table.emplace(std::move(**table));
}

go::GoFunction named(go::Pclntab& table, std::string_view name)
{
  for (size_t i = 0; i < table.size(); ++i)
    if (table.name(i) == name)
      return table.function(i);
  ADD_FAILURE() << name << " not found";
  return {};
}

// The row in effect at address.
fb_unwind_row row_at(const GoRows& rows, uint64_t address)
{
  auto it = std::upper_bound(rows.rows.begin(), rows.rows.end(), address,
                             [](uint64_t at, const auto& row) { return at < row.first; });
  EXPECT_NE(it, rows.rows.begin());
  return std::prev(it)->second;
}

fb_unwind_row row_at(const UnwindTable& table, uint64_t address)
{
  auto it =
      std::upper_bound(table.rows.begin(), table.rows.end(), address - table.base_address,
                       [](uint64_t at, const fb_unwind_row& row) { return at < row.pc_offset; });
  EXPECT_NE(it, table.rows.begin());
  return *std::prev(it);
}

TEST(GoTable, FramelessLeavesFramedCallersAndTheStacksRoots)
{
  GoBinary binary;
  load(binary);
  GoRows rows = go_rows(*binary.table, *binary.elf);
  EXPECT_EQ(rows.functions, binary.table->size());
  EXPECT_EQ(rows.malformed, 0u);
  EXPECT_GT(rows.stack_switches, 0u); // systemstack, mcall, asmcgocall
  for (size_t i = 1; i < rows.rows.size(); ++i)
    ASSERT_LT(rows.rows[i - 1].first, rows.rows[i].first);

  // spin never moves its stack pointer: its caller's sp is the return address's one word up, and
  // the frame pointer is the caller's all along.
  // (Up to the end of its code: the padding after it, which never runs, is left to the frame
  // pointer.)
  go::GoFunction spin = named(*binary.table, "main.spin");
  std::vector<go::PcValueRun> runs;
  ASSERT_TRUE(binary.table->stack_deltas(*binary.table->find(spin.entry), runs));
  for (uint64_t at = spin.entry; at < runs.back().end; ++at) {
    fb_unwind_row row = row_at(rows, at);
    ASSERT_EQ(row.kind, FB_UNWIND_CFA_SP) << std::hex << at;
    ASSERT_EQ(row.cfa_offset, 8) << std::hex << at;
    ASSERT_EQ(row.fp_offset_words, 0) << std::hex << at;
  }
  // heavy has a frame: from its entry until it adjusts its stack, its caller's sp is the return
  // address's one word up; from there on the frame pointer finds its caller (the one or two
  // instructions before rbp points at the frame are the frame pointer's too, go_table.h).
  go::GoFunction heavy = named(*binary.table, "main.heavy");
  EXPECT_EQ(row_at(rows, heavy.entry).kind, FB_UNWIND_CFA_SP);
  EXPECT_EQ(row_at(rows, heavy.entry).cfa_offset, 8);
  bool framed = false;
  for (uint64_t at = heavy.entry; at < heavy.end; ++at) {
    fb_unwind_row row = row_at(rows, at);
    EXPECT_TRUE(row.kind == FB_UNWIND_FRAME_POINTER ||
                (row.kind == FB_UNWIND_CFA_SP && row.cfa_offset == 8))
        << std::hex << at;
    framed = framed || row.kind == FB_UNWIND_FRAME_POINTER;
  }
  EXPECT_TRUE(framed);
  // Most of Go's functions keep a frame pointer.
  EXPECT_GT(rows.framed * 2, rows.functions);
  EXPECT_EQ(row_at(rows, named(*binary.table, "runtime.goexit").entry).kind, FB_UNWIND_STOP);
  // The stack switches leave their caller to the frame pointer, on another stack.
  for (const char* name : {"runtime.systemstack", "runtime.asmcgocall", "runtime.mcall"})
    EXPECT_EQ(row_at(rows, named(*binary.table, name).entry).kind, FB_UNWIND_GO_STACK_SWITCH)
        << name;
}

TEST(GoTable, CfiKeepsTheCodeItsFdesDescribeAndGoFillsTheRest)
{
  GoBinary binary;
  load(binary);
  GoRows rows = go_rows(*binary.table, *binary.elf);
  go::GoFunction spin = named(*binary.table, "main.spin");
  // A CFI table whose one FDE covers spin (as a cgo binary's C code would be covered), and the
  // frame pointer elsewhere.
  UnwindTable cfi;
  cfi.base_address = spin.entry - 0x100;
  fb_unwind_row fde{};
  fde.kind = FB_UNWIND_CFA_SP;
  fde.cfa_offset = 24;
  fde.pc_offset = 0x100;
  fb_unwind_row after{};
  after.kind = FB_UNWIND_FRAME_POINTER;
  after.pc_offset = static_cast<uint32_t>(spin.end - cfi.base_address);
  cfi.rows = {fb_unwind_row{}, fde, after};
  cfi.rows[0].kind = FB_UNWIND_FRAME_POINTER;
  auto merged = merge_rows(cfi, rows, 1 << 20);
  ASSERT_TRUE(merged);
  EXPECT_EQ(merged->rows.back().kind, FB_UNWIND_FRAME_POINTER);
  for (size_t i = 1; i < merged->rows.size(); ++i)
    ASSERT_LT(merged->rows[i - 1].pc_offset, merged->rows[i].pc_offset);
  EXPECT_EQ(row_at(*merged, spin.entry).cfa_offset, 24) << "the FDE's row";
  go::GoFunction heavy = named(*binary.table, "main.heavy");
  EXPECT_EQ(row_at(*merged, heavy.entry).kind, FB_UNWIND_CFA_SP);
  EXPECT_EQ(row_at(*merged, heavy.entry).cfa_offset, 8) << "Go's row";
  EXPECT_EQ(row_at(*merged, rows.end).kind, FB_UNWIND_FRAME_POINTER) << "past Go's text";
  // No room: the merge says so rather than cutting the table.
  EXPECT_FALSE(merge_rows(cfi, rows, 10));
}

// Code bytes for the synthetic functions below, at their offsets from the text's start.
void put_code(std::string& code, size_t at, std::string_view bytes)
{
  if (code.size() < at + bytes.size())
    code.resize(at + bytes.size(), '\x90');
  code.replace(at, bytes.size(), bytes);
}

// The rows of a synthetic Go binary: table as its .gopclntab, code as its text.
void rows_of(const testing::SyntheticPclntab& table, const std::string& code, GoRows& rows)
{
  testing::SyntheticElf elf;
  elf.code = code;
  elf.sections.emplace_back(".gopclntab", table.bytes());
  std::string image = elf.bytes();
  auto reader = ElfReader::open(ElfBytes::memory(image), "synthetic");
  ASSERT_TRUE(reader);
  auto pclntab = go::Pclntab::open(*reader);
  ASSERT_TRUE(pclntab && *pclntab);
  rows = go_rows(**pclntab, *reader);
}

TEST(GoTable, FramedFunctionsTakeRowsForTheirEntryAndTailOnly)
{
  using testing::SyntheticElf;
  testing::SyntheticPclntab table(go::PclntabLayout::kGo120, SyntheticElf::kCodeOffset);
  std::string code;
  // Go 1.21+: push rbp at 4, mov rbp, rsp at 5, sub rsp, 16 at 8; add, pop rbp and ret at
  // 36-41, more of the body, and the stack-growth tail at 56.
  table.add({"main.pushes", 64, {{5, 0}, {7, 8}, {28, 24}, {1, 8}, {1, 0}, {14, 24}, {8, 0}}});
  put_code(code, 4, "\x55\x48\x89\xe5\x48\x83\xec\x10");
  put_code(code, 36, "\x48\x83\xc4\x10\x5d\xc3");
  // Go 1.20 and before: sub rsp, 24 at 4; mov [rsp+16], rbp at 8; lea rbp, [rsp+16] at 13.
  table.add({"main.stores", 64, {{8, 0}, {41, 24}, {1, 0}, {6, 24}, {8, 0}}});
  put_code(code, 64 + 4, "\x48\x83\xec\x18\x48\x89\x6c\x24\x10\x48\x8d\x6c\x24\x10");
  // The same with no locals: the slot at rsp itself, no displacement.
  table.add({"main.stores0", 32, {{8, 0}, {16, 8}, {8, 0}}});
  put_code(code, 128 + 4, "\x48\x83\xec\x08\x48\x89\x2c\x24\x48\x8d\x2c\x24");
  // A frameless leaf, and a frameless function that pushes another register than rbp.
  table.add({"main.leaf", 16, {{16, 0}}});
  table.add({"main.pushesrax", 16, {{1, 0}, {14, 8}, {1, 0}}});
  put_code(code, 176, "\x50");
  GoRows rows;
  ASSERT_NO_FATAL_FAILURE(rows_of(table, code, rows));
  EXPECT_EQ(rows.framed, 3u);
  EXPECT_EQ(rows.malformed, 0u);
  auto expect = [&](uint64_t offset, uint8_t kind, int16_t cfa = 0, int8_t fp = 0) {
    fb_unwind_row row = row_at(rows, SyntheticElf::kCodeOffset + offset);
    EXPECT_EQ(row.kind, kind) << offset;
    EXPECT_EQ(row.cfa_offset, cfa) << offset;
    EXPECT_EQ(row.fp_offset_words, fp) << offset;
  };
  expect(0, FB_UNWIND_CFA_SP, 8);
  expect(4, FB_UNWIND_CFA_SP, 8); // the push
  expect(5, FB_UNWIND_FRAME_POINTER);
  expect(8, FB_UNWIND_FRAME_POINTER);
  expect(41, FB_UNWIND_FRAME_POINTER); // the ret after pop rbp
  expect(55, FB_UNWIND_FRAME_POINTER);
  expect(56, FB_UNWIND_CFA_SP, 8); // the tail
  expect(64 + 7, FB_UNWIND_CFA_SP, 8);
  expect(64 + 8, FB_UNWIND_FRAME_POINTER);
  expect(64 + 18, FB_UNWIND_FRAME_POINTER);
  expect(64 + 56, FB_UNWIND_CFA_SP, 8);
  expect(128 + 7, FB_UNWIND_CFA_SP, 8);
  expect(128 + 8, FB_UNWIND_FRAME_POINTER);
  expect(128 + 24, FB_UNWIND_CFA_SP, 8);
  expect(160, FB_UNWIND_CFA_SP, 8);
  // Not Go's framing: every run keeps its row.
  expect(176, FB_UNWIND_CFA_SP, 8);
  expect(177, FB_UNWIND_CFA_SP, 16, -2);
  expect(191, FB_UNWIND_CFA_SP, 8);
  // Two rows for each framed function (a tail and the next entry share one), the first entry's,
  // and two for the push of rax and after it.
  EXPECT_EQ(rows.rows.size(), 3u * 2 + 1 + 2);
}

TEST(GoTable, CodeThatIsNotGosFramingKeepsEveryRun)
{
  using testing::SyntheticElf;
  testing::SyntheticPclntab table(go::PclntabLayout::kGo120, SyntheticElf::kCodeOffset);
  // A table that claims a frame where the code stores rbp at another slot than the frame's top,
  // and one whose frame would be set up past the end of the file's code.
  table.add({"main.elsewhere", 32, {{8, 0}, {16, 24}, {8, 0}}});
  std::string code;
  put_code(code, 4, "\x48\x83\xec\x18\x48\x89\x6c\x24\x08\x48\x8d\x6c\x24\x08");
  uint32_t filler = static_cast<uint32_t>(SyntheticElf::kCodeSize) - 32 - 8;
  table.add({"main.filler", filler, {{filler, 0}}});
  table.add({"main.edge", 32, {{12, 0}, {12, 8}, {8, 0}}});
  GoRows rows;
  ASSERT_NO_FATAL_FAILURE(rows_of(table, code, rows));
  EXPECT_EQ(rows.framed, 0u);
  fb_unwind_row row = row_at(rows, SyntheticElf::kCodeOffset + 8);
  EXPECT_EQ(row.kind, FB_UNWIND_CFA_SP);
  EXPECT_EQ(row.cfa_offset, 32);
  row = row_at(rows, SyntheticElf::kCodeOffset + SyntheticElf::kCodeSize + 4);
  EXPECT_EQ(row.kind, FB_UNWIND_CFA_SP);
  EXPECT_EQ(row.cfa_offset, 16);
}

} // namespace
} // namespace flamebpf::unwind
