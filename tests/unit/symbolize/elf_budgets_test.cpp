// The byte budgets of ElfSymbols on ELF files no linker would make: a section count in the
// millions, tables that claim gigabytes, names of any length, a name shared by many symbols.
#include <chrono>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <string>
#include <sys/resource.h>
#include <unistd.h>

#include "symbolize/demangle.h"
#include "symbolize/elf_symbols.h"
#include "symbolize/name_cut.h"
#include "synthetic_elf.h"
#include "test_support.h"

namespace flamebpf::symbolize {
namespace {

using flamebpf::testing::SyntheticElf;
using flamebpf::testing::SyntheticSymbol;
using flamebpf::testing::TempDir;

constexpr uint64_t kCode = SyntheticElf::kCodeOffset;

long peak_rss_kb()
{
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

class ElfBudgets : public ::testing::Test {
protected:
  // Writes image to a file, extended (sparse) to size bytes if larger, and reads its symbols.
  Result<std::unique_ptr<ElfSymbols>> open_image(const std::string& image, uint64_t size = 0)
  {
    std::string path = (dir_.path() / "image.so").string();
    flamebpf::testing::write_file(path, image);
    if (size > image.size()) {
      EXPECT_EQ(::truncate(path.c_str(), static_cast<off_t>(size)), 0);
    }
    return ElfSymbols::open(UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC)), "/image.so", {},
                            path);
  }

  TempDir dir_;
};

TEST_F(ElfBudgets, SyntheticImageIsRead)
{
  SyntheticElf elf;
  elf.symbols = {{"first", kCode, 0x10}, {"second", kCode + 0x10, 0x10}};
  auto symbols = open_image(elf.bytes());
  ASSERT_TRUE(symbols.has_value()) << symbols.error().message;
  EXPECT_EQ((*symbols)->symbolize_file_offset(kCode + 4), "first");
  EXPECT_EQ((*symbols)->symbolize_file_offset(kCode + 0x14), "second");
  EXPECT_TRUE((*symbols)->problems().empty());
}

// libelf allocates and fills a descriptor for every section the header claims: ten million
// sections in a sparse file took it to 2 GB.
TEST_F(ElfBudgets, MillionsOfSectionsAreRefusedBeforeAnythingIsAllocated)
{
  SyntheticElf elf;
  elf.symbols = {{"first", kCode, 0x10}};
  elf.claimed_section_count = 10'000'000;
  long before = peak_rss_kb();
  auto started = std::chrono::steady_clock::now();
  auto symbols = open_image(elf.bytes(), uint64_t{64} << 30);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ASSERT_FALSE(symbols.has_value());
  EXPECT_NE(symbols.error().message.find("10000000 sections"), std::string::npos)
      << symbols.error().message;
  EXPECT_LT(peak_rss_kb() - before, 16 * 1024);
  EXPECT_LT(seconds, 1.0);
}

TEST_F(ElfBudgets, SymbolTableClaimingGigabytesIsReadUpToItsBudget)
{
  SyntheticElf elf;
  elf.symbols = {{"first", kCode, 0x10}};
  // The claimed table runs on into the sparse rest of the file: zeros, no symbols.
  elf.claimed_symtab_size = uint64_t{4} << 30;
  long before = peak_rss_kb();
  auto symbols = open_image(elf.bytes(), uint64_t{8} << 30);
  ASSERT_TRUE(symbols.has_value()) << symbols.error().message;
  EXPECT_EQ((*symbols)->symbolize_file_offset(kCode + 4), "first");
  ASSERT_EQ((*symbols)->problems().size(), 1u);
  EXPECT_EQ((*symbols)->problems()[0], ".symtab larger than 64 MiB, symbols past it ignored");
  // Read in small steps: never the whole budget at once.
  EXPECT_LT(peak_rss_kb() - before, 16 * 1024);
}

TEST_F(ElfBudgets, StringTableLargerThanItsBudgetKeepsTheNamesWithin)
{
  SyntheticElf elf;
  elf.symbols = {{"first", kCode, 0x10}};
  elf.claimed_strtab_size = uint64_t{1} << 30;
  auto symbols = open_image(elf.bytes(), uint64_t{2} << 30);
  ASSERT_TRUE(symbols.has_value()) << symbols.error().message;
  EXPECT_EQ((*symbols)->symbolize_file_offset(kCode + 4), "first");
  ASSERT_EQ((*symbols)->problems().size(), 1u);
  EXPECT_NE((*symbols)->problems()[0].find("string table of .symtab larger than 64 MiB"),
            std::string::npos);
}

TEST_F(ElfBudgets, NameLongerThanItsBudgetIsCutVisibly)
{
  SyntheticElf elf;
  std::string long_name(10000, 'n');
  elf.symbols = {{long_name, kCode, 0x10}, {"short", kCode + 0x10, 0x10}};
  auto symbols = open_image(elf.bytes());
  ASSERT_TRUE(symbols.has_value()) << symbols.error().message;
  auto name = (*symbols)->symbolize_file_offset(kCode + 4);
  ASSERT_TRUE(name.has_value());
  EXPECT_EQ(*name,
            std::string(kMaxSymbolNameBytes - kTruncated.size(), 'n') + std::string(kTruncated));
  EXPECT_TRUE((*symbols)->match_file_offset(kCode + 4)->cut);
  EXPECT_FALSE((*symbols)->match_file_offset(kCode + 0x14)->cut);
  EXPECT_EQ((*symbols)->symbolize_file_offset(kCode + 0x14), "short");
  EXPECT_EQ((*symbols)->names_cut(), 1u);
  ASSERT_EQ((*symbols)->problems().size(), 1u);
  EXPECT_EQ((*symbols)->problems()[0], "1 names of .symtab longer than 4096 bytes cut");
}

// A mangled name that was cut cannot be demangled: it stays as read, marked.
TEST_F(ElfBudgets, CutMangledNameIsNotDemangled)
{
  SyntheticElf elf;
  std::string mangled = "_Z1f" + std::string(5000, 'i');
  elf.symbols = {{mangled, kCode, 0x10}};
  auto symbols = open_image(elf.bytes());
  ASSERT_TRUE(symbols.has_value()) << symbols.error().message;
  EXPECT_EQ((*symbols)->symbolize_file_offset(kCode + 4),
            mangled.substr(0, kMaxSymbolNameBytes - kTruncated.size()) + std::string(kTruncated));
}

TEST_F(ElfBudgets, ExponentialMangledNameIsCutWhenDemangled)
{
  SyntheticElf elf;
  elf.symbols = {{flamebpf::testing::exponential_mangled_name(), kCode, 0x10}};
  auto symbols = open_image(elf.bytes());
  ASSERT_TRUE(symbols.has_value()) << symbols.error().message;
  auto started = std::chrono::steady_clock::now();
  auto name = (*symbols)->symbolize_file_offset(kCode + 4);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ASSERT_TRUE(name.has_value());
  EXPECT_EQ(name->size(), kMaxDemangledBytes);
  EXPECT_TRUE(name->starts_with("f(X, A<X, X>, A<A<X, X>, A<X, X> >")) << name->substr(0, 80);
  EXPECT_TRUE(name->ends_with(kTruncated));
  EXPECT_TRUE((*symbols)->match_file_offset(kCode + 4)->cut);
  EXPECT_EQ((*symbols)->names_cut(), 1u);
  EXPECT_LT(seconds, 1.0);
}

// Many symbols sharing one long name hold it once, not once per symbol.
TEST_F(ElfBudgets, NameSharedByManySymbolsIsHeldOnce)
{
  SyntheticElf elf;
  std::string name(4000, 's');
  for (uint64_t i = 0; i < 4096; ++i)
    elf.symbols.push_back({name, kCode + (i % SyntheticElf::kCodeSize), 1});
  auto symbols = open_image(elf.bytes());
  ASSERT_TRUE(symbols.has_value()) << symbols.error().message;
  EXPECT_EQ((*symbols)->symbol_count(), 4096u);
  EXPECT_LT((*symbols)->memory_bytes(), 4096 * sizeof(ElfSymbols::Symbol) + 4 * name.size());
}

// Names that run to the end of the string table with no NUL are no names; the names before them
// are kept, and many symbols named inside one long unterminated run cost no search each.
TEST_F(ElfBudgets, NamesWithoutAnEndAreSkippedInOneSearch)
{
  SyntheticElf elf;
  elf.unterminated_tail = std::string(8 << 20, 'u');
  elf.symbols = {{"kept", kCode, 0x10}};
  for (uint32_t i = 0; i < 100000; ++i)
    elf.symbols.push_back({"", kCode + 0x10 + i % 0x100, 1, STT_FUNC, i * 64});
  auto started = std::chrono::steady_clock::now();
  auto symbols = open_image(elf.bytes());
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ASSERT_TRUE(symbols.has_value()) << symbols.error().message;
  EXPECT_EQ((*symbols)->symbol_count(), 1u);
  EXPECT_EQ((*symbols)->symbolize_file_offset(kCode + 4), "kept");
  EXPECT_FALSE((*symbols)->symbolize_file_offset(kCode + 0x14).has_value());
  EXPECT_LT(seconds, 5.0);
}

} // namespace
} // namespace flamebpf::symbolize
