#include <gtest/gtest.h>

#include "runtimes/hotspot/jit_table.h"

namespace flamebpf::hotspot {
namespace {

JvmRecords parse(std::initializer_list<const char*> lines)
{
  JvmRecords records;
  for (const char* line : lines) {
    auto record = parse_jvm_record_line(line);
    EXPECT_TRUE(record) << line;
    if (record)
      records.apply(*record);
  }
  return records;
}

struct Rule {
  uint32_t pc_offset;
  uint8_t kind;
  int16_t cfa_offset;
  int8_t fp_words;
  friend bool operator==(const Rule&, const Rule&) = default;
};

std::vector<Rule> rules(const UnwindTable& table)
{
  std::vector<Rule> out;
  for (const auto& row : table.rows)
    out.push_back({row.pc_offset, row.kind, row.cfa_offset, row.fp_offset_words});
  return out;
}

std::ostream& operator<<(std::ostream& os, const Rule& rule)
{
  return os << "{" << rule.pc_offset << " kind " << int{rule.kind} << " cfa " << rule.cfa_offset
            << " fp " << int{rule.fp_words} << "}";
}

const std::vector<CodeRange> kCodeCache{{0x10000, 0x20000}};

TEST(JitTable, DescribesEachPrologueFormAndTheInterpreter)
{
  auto records = parse({
      "interpreter 10000 800",
      "code 11000 100 6 40 push 20 24", // push rbp ends at +0x20, sub rsp at +0x24
      "code 11100 80 4 -1 save 7 c",    // sub rsp ends at +7, the store of rbp at +0xc
      "code 11200 80 3 16 none 0 0",    // prologue unknown: frame pointers until complete (16,
                                        // decimal)
      "code 11300 80 0 -1 none 0 0",    // no frame of its own: frame pointers
  });
  JitTableDrops drops;
  auto table = build_jit_table(records, kCodeCache, &drops);
  ASSERT_TRUE(table);
  EXPECT_EQ(table->base_address, 0x10000u);
  EXPECT_EQ(drops.total(), 0u);
  std::vector<Rule> expected{
      {0x0, FB_UNWIND_HOTSPOT_INTERPRETER, 0, 0},
      {0x800, FB_UNWIND_FRAME_POINTER, 0, 0},
      {0x1000, FB_UNWIND_CFA_SP, 8, 0},
      {0x1020, FB_UNWIND_CFA_SP, 16, -2},
      {0x1024, FB_UNWIND_HOTSPOT_COMPILED, 48, -2},
      {0x1100, FB_UNWIND_CFA_SP, 8, 0},
      {0x1107, FB_UNWIND_CFA_SP, 32, 0},
      {0x110c, FB_UNWIND_HOTSPOT_COMPILED, 32, -2},
      {0x1180, FB_UNWIND_FRAME_POINTER, 0, 0},
      {0x1210, FB_UNWIND_HOTSPOT_COMPILED, 24, -2},
      {0x1280, FB_UNWIND_FRAME_POINTER, 0, 0},
  };
  EXPECT_EQ(rules(*table), expected);
}

TEST(JitTable, DropsAndCountsGarbage)
{
  auto records = parse({
      "code 11000 100 99999 40 none 0 0", // a frame no JVM has
      "code 30000 100 6 40 push 20 24",   // outside the code cache
      "code 1fff0 100 6 40 push 20 24",   // runs past its end
      "code 12000 100 6 40 push 20 24",
  });
  JitTableDrops drops;
  auto table = build_jit_table(records, kCodeCache, &drops);
  ASSERT_TRUE(table);
  EXPECT_EQ(drops.frame_too_large, 1u);
  EXPECT_EQ(drops.outside_code_cache, 2u);
  EXPECT_EQ(table->base_address, 0x12000u);
  EXPECT_EQ(table->rows.size(), 4u);
  EXPECT_EQ(table->rows.back().kind, FB_UNWIND_FRAME_POINTER);
}

TEST(JitTable, NothingToDescribeIsNoTable)
{
  auto records = parse({"code 11000 100 0 -1 none 0 0"});
  EXPECT_FALSE(build_jit_table(records, kCodeCache, nullptr));
}

TEST(JitTableKeeper, RebuildsOnlyWhenTheRecordsChange)
{
  auto records = parse({"code 11000 100 6 40 push 20 24"});
  JitTableKeeper keeper;
  EXPECT_TRUE(keeper.rebuild(records, kCodeCache, nullptr));
  EXPECT_FALSE(keeper.rebuild(records, kCodeCache, nullptr));
  records.apply(*parse_jvm_record_line("unload 11000"));
  records.apply(*parse_jvm_record_line("code 11000 80 4 20 push 8 c"));
  auto rebuilt = keeper.rebuild(records, kCodeCache, nullptr);
  ASSERT_TRUE(rebuilt);
  EXPECT_EQ(rebuilt->rows[2].cfa_offset, 32);
}

} // namespace
} // namespace flamebpf::hotspot
