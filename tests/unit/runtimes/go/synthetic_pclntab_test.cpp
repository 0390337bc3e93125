// Every pclntab layout, including those no toolchain here writes (Go 1.2 to 1.17), read from
// tables written byte by byte (synthetic_pclntab.h) into an ELF file's .gopclntab.
#include <gtest/gtest.h>

#include "runtimes/go/pclntab.h"
#include "symbolize/synthetic_elf.h"
#include "synthetic_pclntab.h"

namespace flamebpf::go {
namespace {

using testing::SyntheticElf;
using testing::SyntheticGoFunction;
using testing::SyntheticPclntab;

constexpr uint64_t kText = SyntheticElf::kCodeOffset;

std::string image_of(PclntabLayout layout)
{
  SyntheticPclntab table(layout, kText);
  table.add({"main.framed", 32, {{4, 0}, {24, 16}, {4, 0}}});
  table.add({"main.leaf", 16, {{16, 0}}});
  table.add({"runtime.goexit", 8, {{8, 0}}, 1});
  SyntheticElf elf;
  elf.sections.emplace_back(".gopclntab", table.bytes());
  return elf.bytes();
}

class SyntheticPclntabTest : public ::testing::TestWithParam<PclntabLayout> {};

TEST_P(SyntheticPclntabTest, NamesStackDeltasAndRootsInEveryLayout)
{
  std::string image = image_of(GetParam());
  auto elf = ElfReader::open(ElfBytes::memory(image), "synthetic");
  ASSERT_TRUE(elf) << elf.error().message;
  auto table = Pclntab::open(*elf);
  ASSERT_TRUE(table) << table.error().message;
  ASSERT_TRUE(*table);
  Pclntab& pclntab = **table;
  EXPECT_EQ(pclntab.layout(), GetParam());
  ASSERT_EQ(pclntab.size(), 3u);
  EXPECT_EQ(pclntab.name(0), "main.framed");
  EXPECT_EQ(pclntab.name(1), "main.leaf");
  EXPECT_EQ(pclntab.name(2), "runtime.goexit");
  EXPECT_EQ(pclntab.function(0).entry, kText);
  EXPECT_EQ(pclntab.function(0).end, kText + 32);
  EXPECT_EQ(pclntab.function(2).end, kText + 56);
  EXPECT_EQ(pclntab.find(kText + 31), 0u);
  EXPECT_EQ(pclntab.find(kText + 32), 1u);
  EXPECT_FALSE(pclntab.find(kText + 56));
  EXPECT_FALSE(pclntab.find(kText - 1));

  std::vector<PcValueRun> runs;
  ASSERT_TRUE(pclntab.stack_deltas(0, runs));
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].begin, kText);
  EXPECT_EQ(runs[0].value, 0);
  EXPECT_EQ(runs[1].begin, kText + 4);
  EXPECT_EQ(runs[1].end, kText + 28);
  EXPECT_EQ(runs[1].value, 16);
  EXPECT_EQ(runs[2].value, 0);
  EXPECT_EQ(runs[2].end, kText + 32);

  auto root = pclntab.flags(2);
  ASSERT_TRUE(root);
  EXPECT_TRUE(root->top_frame) << "by its flag from Go 1.18, by its name before";
  EXPECT_FALSE(pclntab.flags(0)->top_frame);
  EXPECT_EQ(pclntab.malformed(), 0u);
}

TEST_P(SyntheticPclntabTest, RecordsThatAreNotTheirFunctionsAreSkipped)
{
  std::string image = image_of(GetParam());
  auto elf = ElfReader::open(ElfBytes::memory(image), "synthetic");
  ASSERT_TRUE(elf);
  // The function table's second entry says its record is the first function's.
  const ElfSection* section = elf->section_named(".gopclntab");
  ASSERT_TRUE(section);
  auto table = Pclntab::open(*elf);
  ASSERT_TRUE(table && *table);
  std::string spoiled = image;
  size_t header = GetParam() == PclntabLayout::kGo12    ? 16
                  : GetParam() == PclntabLayout::kGo116 ? 64
                                                        : 72;
  size_t function_table = header;
  if (GetParam() != PclntabLayout::kGo12) {
    uint64_t offset = 0;
    std::memcpy(&offset, image.data() + section->offset + header - 8, 8); // pclnOffset
    function_table = offset;
  }
  size_t entry = GetParam() == PclntabLayout::kGo118 || GetParam() == PclntabLayout::kGo120 ? 4 : 8;
  // Entry 1's record offset := entry 0's.
  std::memcpy(spoiled.data() + section->offset + function_table + 3 * entry,
              image.data() + section->offset + function_table + entry, entry);
  auto spoiled_elf = ElfReader::open(ElfBytes::memory(spoiled), "spoiled");
  ASSERT_TRUE(spoiled_elf);
  auto spoiled_table = Pclntab::open(*spoiled_elf);
  ASSERT_TRUE(spoiled_table && *spoiled_table);
  EXPECT_EQ((*spoiled_table)->name(0), "main.framed");
  EXPECT_EQ((*spoiled_table)->name(1), "") << "its record is another function's";
  std::vector<PcValueRun> runs;
  EXPECT_FALSE((*spoiled_table)->stack_deltas(1, runs));
  EXPECT_EQ((*spoiled_table)->malformed(), 2u);
}

INSTANTIATE_TEST_SUITE_P(Layouts,
                         SyntheticPclntabTest,
                         ::testing::Values(PclntabLayout::kGo12,
                                           PclntabLayout::kGo116,
                                           PclntabLayout::kGo118,
                                           PclntabLayout::kGo120),
                         [](const ::testing::TestParamInfo<PclntabLayout>& param) {
                           switch (param.param) {
                           case PclntabLayout::kGo12:
                             return "Go1_2";
                           case PclntabLayout::kGo116:
                             return "Go1_16";
                           case PclntabLayout::kGo118:
                             return "Go1_18";
                           case PclntabLayout::kGo120:
                             break;
                           }
                           return "Go1_20";
                         });

} // namespace
} // namespace flamebpf::go
