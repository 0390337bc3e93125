#include <fcntl.h>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "common/elf_reader.h"
#include "common/unique_fd.h"
#include "go_splits.h"
#include "runtimes/go/pclntab.h"

namespace flamebpf::go {
namespace {

// A binary's bytes held in memory (so that tests may spoil copies), and its reader.
struct Binary {
  std::string bytes;
  std::optional<ElfReader> elf;
};

Binary load(const std::string& path)
{
  std::ifstream file(path, std::ios::binary);
  std::stringstream content;
  content << file.rdbuf();
  Binary binary{content.str(), std::nullopt};
  return binary;
}

void open_elf(Binary& binary, const std::string& shown)
{
  auto elf = ElfReader::open(ElfBytes::memory(binary.bytes), shown);
  ASSERT_TRUE(elf) << elf.error().message;
  binary.elf.emplace(std::move(*elf));
}

std::optional<size_t> function_named(Pclntab& table, std::string_view name)
{
  for (size_t i = 0; i < table.size(); ++i)
    if (table.name(i) == name)
      return i;
  return std::nullopt;
}

class PclntabTest : public ::testing::TestWithParam<std::string> {
protected:
  std::string path(const std::string& variant) const
  {
    return testing::go_split(GetParam(), variant);
  }
};

TEST_P(PclntabTest, NamesEveryFunctionOfStrippedAndUnstrippedBinaries)
{
  for (const char* variant :
       {"split", "split.stripped", "split.nosections", "split.pie", "split.pie.external"}) {
    SCOPED_TRACE(variant);
    Binary binary = load(path(variant));
    open_elf(binary, variant);
    auto table = Pclntab::open(*binary.elf);
    ASSERT_TRUE(table) << table.error().message;
    ASSERT_TRUE(*table);
    Pclntab& pclntab = **table;
    // Go 1.19 and earlier have the 1.18 layout here; 1.20 and later the 1.20 one.
    EXPECT_TRUE(pclntab.layout() == PclntabLayout::kGo118 ||
                pclntab.layout() == PclntabLayout::kGo120);
    EXPECT_GT(pclntab.size(), 1000u);
    for (const char* name : {"main.spin", "main.heavy", "main.light", "main.outer", "main.main",
                             "runtime.goexit", "runtime.main"}) {
      auto index = function_named(pclntab, name);
      ASSERT_TRUE(index) << name;
      GoFunction function = pclntab.function(*index);
      EXPECT_LT(function.entry, function.end) << name;
      EXPECT_EQ(pclntab.find(function.entry), index) << name;
      EXPECT_EQ(pclntab.find(function.end - 1), index) << name;
    }
    EXPECT_EQ(pclntab.malformed(), 0u);
  }
}

TEST_P(PclntabTest, StackDeltasShowAFramelessLeafAndFramedCallers)
{
  Binary binary = load(path("split.noinline.stripped"));
  open_elf(binary, "split.noinline.stripped");
  auto table = Pclntab::open(*binary.elf);
  ASSERT_TRUE(table && *table);
  Pclntab& pclntab = **table;
  std::vector<PcValueRun> runs;

  auto spin = function_named(pclntab, "main.spin");
  ASSERT_TRUE(spin);
  ASSERT_TRUE(pclntab.stack_deltas(*spin, runs));
  ASSERT_FALSE(runs.empty());
  EXPECT_EQ(runs.front().begin, pclntab.function(*spin).entry);
  for (const auto& run : runs)
    EXPECT_EQ(run.value, 0) << "spin is frameless";

  auto heavy = function_named(pclntab, "main.heavy");
  ASSERT_TRUE(heavy);
  runs.clear();
  ASSERT_TRUE(pclntab.stack_deltas(*heavy, runs));
  GoFunction function = pclntab.function(*heavy);
  EXPECT_EQ(runs.front().begin, function.entry);
  EXPECT_EQ(runs.front().value, 0) << "nothing pushed at the entry";
  int32_t deepest = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    deepest = std::max(deepest, runs[i].value);
    EXPECT_LE(runs[i].end, function.end);
    if (i > 0) {
      EXPECT_EQ(runs[i].begin, runs[i - 1].end);
    }
  }
  EXPECT_GE(deepest, 16) << "heavy calls work: it has a frame, its saved frame pointer in it";
  EXPECT_EQ(deepest % 8, 0);

  auto goexit = function_named(pclntab, "runtime.goexit");
  ASSERT_TRUE(goexit);
  auto flags = pclntab.flags(*goexit);
  ASSERT_TRUE(flags);
  EXPECT_TRUE(flags->top_frame);
  auto heavy_flags = pclntab.flags(*heavy);
  ASSERT_TRUE(heavy_flags);
  EXPECT_FALSE(heavy_flags->top_frame);
  EXPECT_FALSE(heavy_flags->sp_write);
  auto systemstack = function_named(pclntab, "runtime.systemstack");
  ASSERT_TRUE(systemstack);
  EXPECT_TRUE(pclntab.flags(*systemstack)->sp_write) << "it switches stacks";
}

TEST_P(PclntabTest, InlineTreesNameTheCallsInlinedIntoAFunction)
{
  // A position-independent binary's module data, which locates the trees, is filled at load
  // time: Go's linker leaves zeros and relocations in the file, the system's writes both.
  for (const char* variant : {"split", "split.stripped", "split.pie", "split.pie.external"}) {
    SCOPED_TRACE(variant);
    Binary binary = load(path(variant));
    open_elf(binary, variant);
    auto table = Pclntab::open(*binary.elf);
    ASSERT_TRUE(table && *table);
    Pclntab& pclntab = **table;
    auto heavy = function_named(pclntab, "main.heavy");
    ASSERT_TRUE(heavy);
    std::vector<PcValueRun> runs;
    std::vector<Pclntab::InlinedCall> calls;
    ASSERT_TRUE(pclntab.inline_tree(*heavy, runs, calls));
    bool inlined_work = false;
    for (const auto& run : runs) {
      if (run.value < 0)
        continue;
      ASSERT_LT(static_cast<size_t>(run.value), calls.size());
      const auto& call = calls[static_cast<size_t>(run.value)];
      if (call.name == "main.work") {
        inlined_work = true;
        EXPECT_EQ(call.parent, -1) << "work is inlined into heavy itself";
      }
    }
    EXPECT_TRUE(inlined_work);
  }
  // With -gcflags=-l nothing is inlined into heavy.
  Binary binary = load(path("split.noinline"));
  open_elf(binary, "split.noinline");
  auto table = Pclntab::open(*binary.elf);
  ASSERT_TRUE(table && *table);
  auto heavy = function_named(**table, "main.heavy");
  ASSERT_TRUE(heavy);
  std::vector<PcValueRun> runs;
  std::vector<Pclntab::InlinedCall> calls;
  (*table)->inline_tree(*heavy, runs, calls);
  for (const auto& call : calls)
    EXPECT_NE(call.name, "main.work");
}

TEST_P(PclntabTest, PositionIndependentBinariesTablesAreFoundWhereTheirLinkerPutThem)
{
  // Go's linker keeps a section of the table's own; the system's merges it into .data.rel.ro,
  // where it is searched for, and where a Go binary's table that cannot be found is an error.
  Binary internal = load(path("split.pie"));
  open_elf(internal, "split.pie");
  EXPECT_TRUE(internal.elf->section_named(".data.rel.ro.gopclntab"));
  Binary external = load(path("split.pie.external"));
  open_elf(external, "split.pie.external");
  const ElfSection* relro = external.elf->section_named(".data.rel.ro");
  ASSERT_TRUE(relro);
  EXPECT_FALSE(external.elf->section_named(".gopclntab"));
  auto table = Pclntab::open(*external.elf);
  ASSERT_TRUE(table && *table);
  auto spin = function_named(**table, "main.spin");
  ASSERT_TRUE(spin);
  EXPECT_EQ((*table)->find((*table)->function(*spin).entry), spin);
  // As lld links it: the header's text start left to the loader, written by a relocation only.
  // .text starts with the C runtime's code, so only the relocation places Go's functions.
  Binary zeroed{external.bytes, std::nullopt};
  uint64_t entry = (*table)->function(*spin).entry;
  size_t header =
      zeroed.bytes.find(std::string("\xf1\xff\xff\xff\x00\x00\x01\x08", 8), relro->offset);
  if (header == std::string::npos)
    header = zeroed.bytes.find(std::string("\xf0\xff\xff\xff\x00\x00\x01\x08", 8), relro->offset);
  ASSERT_NE(header, std::string::npos);
  zeroed.bytes.replace(header + 8 + 2 * 8, 8, std::string(8, '\0'));
  open_elf(zeroed, "zeroed");
  auto relocated = Pclntab::open(*zeroed.elf);
  ASSERT_TRUE(relocated && *relocated);
  auto relocated_spin = function_named(**relocated, "main.spin");
  ASSERT_TRUE(relocated_spin);
  EXPECT_EQ((*relocated)->function(*relocated_spin).entry, entry);
  // The same bytes with every header's magic spoiled: a Go binary whose table is not found.
  Binary spoiled{external.bytes, std::nullopt};
  for (size_t at = relro->offset; at + 8 <= relro->offset + relro->size; at += 8)
    if (spoiled.bytes.compare(at, 4, std::string("\xf1\xff\xff\xff", 4)) == 0 ||
        spoiled.bytes.compare(at, 4, std::string("\xf0\xff\xff\xff", 4)) == 0)
      spoiled.bytes[at] = 0;
  open_elf(spoiled, "spoiled");
  auto none = Pclntab::open(*spoiled.elf);
  EXPECT_FALSE(none);
}

TEST_P(PclntabTest, SpoiledTablesAreRefusedOrReadWithinTheirBounds)
{
  Binary pristine = load(path("split.stripped"));
  open_elf(pristine, "split.stripped");
  const ElfSection* section = pristine.elf->section_named(".gopclntab");
  ASSERT_TRUE(section);
  auto spoil = [&](size_t at, const std::string& with) {
    Binary copy{pristine.bytes, std::nullopt};
    copy.bytes.replace(section->offset + at, with.size(), with);
    auto elf = ElfReader::open(ElfBytes::memory(copy.bytes), "spoiled");
    EXPECT_TRUE(elf);
    auto table = Pclntab::open(*elf);
    if (table && *table) {
      // Whatever was read must stay inside the file: every function named or skipped.
      for (size_t i = 0; i < (*table)->size(); ++i) {
        std::vector<PcValueRun> runs;
        (void)(*table)->name(i);
        (void)(*table)->stack_deltas(i, runs);
        std::vector<Pclntab::InlinedCall> calls;
        (void)(*table)->inline_tree(i, runs, calls);
      }
    }
    return table.has_value() && table->has_value();
  };
  // A header whose function count or offsets point past the table.
  EXPECT_FALSE(spoil(8, std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8)));
  EXPECT_FALSE(spoil(8 + 8 * 7, std::string("\xff\xff\xff\xff\x00\x00\x00\x00", 8)));
  // A magic no Go release wrote.
  EXPECT_FALSE(spoil(0, std::string("\xf5\xff\xff\xff", 4)));
  // Garbage over the records and pc-value tables: read, within bounds, and counted.
  for (size_t at = 4096; at + 64 < section->size; at += section->size / 7)
    spoil(at, std::string(64, '\xff'));
}

INSTANTIATE_TEST_SUITE_P(GoToolchains,
                         PclntabTest,
                         ::testing::ValuesIn(testing::go_split_versions()),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           return testing::go_test_name(param.param);
                         });

} // namespace
} // namespace flamebpf::go
