#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <string>

#include "common/elf_reader.h"
#include "go_splits.h"
#include "runtimes/go/pclntab.h"
#include "runtimes/go_abi.h"
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
  GoRows rows = go_rows(*binary.table);
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
  // heavy has a frame: inside it the CFA is further up, the caller's fp saved below the return
  // address.
  go::GoFunction heavy = named(*binary.table, "main.heavy");
  EXPECT_EQ(row_at(rows, heavy.entry).cfa_offset, 8);
  bool framed = false;
  for (uint64_t at = heavy.entry; at < heavy.end; ++at) {
    fb_unwind_row row = row_at(rows, at);
    if (row.kind == FB_UNWIND_CFA_SP && row.cfa_offset > 8) {
      framed = true;
      EXPECT_EQ(row.fp_offset_words, -2);
    }
  }
  EXPECT_TRUE(framed);
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
  GoRows rows = go_rows(*binary.table);
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

} // namespace
} // namespace flamebpf::unwind
