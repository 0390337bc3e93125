#include <cstdio>
#include <gtest/gtest.h>
#include <string>

#include "symbolize/kallsyms.h"
#include "symbolize/kernel_names.h"
#include "test_support.h"

namespace flamebpf::symbolize {
namespace {

using flamebpf::testing::data_path;
using flamebpf::testing::read_data;

class KallsymsSample : public ::testing::Test {
protected:
  void SetUp() override
  {
    auto parsed = KernelSymbols::parse(read_data("kallsyms/sample.txt"));
    ASSERT_TRUE(parsed.has_value()) << parsed.error().message;
    symbols_ = std::move(*parsed);
  }

  // The name of the symbol covering address, or "" if none.
  std::string name_at(uint64_t address) const
  {
    auto symbol = symbols_.lookup(address);
    return symbol ? std::string(symbol->name) : "";
  }

  KernelSymbols symbols_;
};

TEST_F(KallsymsSample, KeepsOnlyFunctionSymbols)
{
  // t, T, w and W lines; the D, d, r, b, B and A lines and the malformed ones (including a
  // two-letter type) are dropped.
  EXPECT_EQ(symbols_.size(), 9u);
}

TEST_F(KallsymsSample, ExactAddress)
{
  auto symbol = symbols_.lookup(0xffffffff81002000);
  ASSERT_TRUE(symbol.has_value());
  EXPECT_EQ(symbol->name, "do_syscall_64");
  EXPECT_EQ(symbol->address, 0xffffffff81002000u);
  EXPECT_EQ(symbol->module, "");
}

TEST_F(KallsymsSample, InsideAFunction)
{
  EXPECT_EQ(name_at(0xffffffff81001234), "native_safe_halt");
  EXPECT_EQ(name_at(0xffffffff81001fff), "native_safe_halt");
  EXPECT_EQ(name_at(0xffffffff81003010), "arch_cpu_idle");     // W
  EXPECT_EQ(name_at(0xffffffff81004010), "weak_lowercase_fn"); // w
}

TEST_F(KallsymsSample, DataSymbolsDoNotSplitFunctions)
{
  // syscall_table_data (D) sits at ...2800, inside do_syscall_64's range.
  EXPECT_EQ(name_at(0xffffffff81002900), "do_syscall_64");
}

TEST_F(KallsymsSample, UnsortedLinesAreSorted)
{
  // nft_lookup_eval is listed after nft_do_chain but lies below it.
  EXPECT_EQ(name_at(0xffffffffc0a00010), "nft_lookup_eval");
  EXPECT_EQ(name_at(0xffffffffc0a01010), "nft_do_chain");
  // native_safe_halt is listed after do_syscall_64 but lies below it.
  EXPECT_EQ(name_at(0xffffffff81001000), "native_safe_halt");
}

TEST_F(KallsymsSample, BeforeTheFirstSymbolIsNothing)
{
  EXPECT_FALSE(symbols_.lookup(0xffffffff80ffffff).has_value());
  EXPECT_FALSE(symbols_.lookup(0).has_value());
  EXPECT_TRUE(symbols_.lookup(0xffffffff81000000).has_value());
}

TEST_F(KallsymsSample, ModuleNameIsKept)
{
  auto symbol = symbols_.lookup(0xffffffffc0a01080);
  ASSERT_TRUE(symbol.has_value());
  EXPECT_EQ(symbol->name, "nft_do_chain");
  EXPECT_EQ(symbol->module, "nf_tables");
  // A module's data symbol does not end its function either.
  symbol = symbols_.lookup(0xffffffffc0a02010);
  ASSERT_TRUE(symbol.has_value());
  EXPECT_EQ(symbol->name, "nft_do_chain");

  symbol = symbols_.lookup(0xffffffffc0b00100);
  ASSERT_TRUE(symbol.has_value());
  EXPECT_EQ(symbol->name, "ext4_file_read_iter");
  EXPECT_EQ(symbol->module, "ext4");
}

TEST(Kallsyms, AllZeroAddressesAreAnError)
{
  auto parsed = KernelSymbols::parse("0000000000000000 T _stext\n"
                                     "0000000000000000 t native_safe_halt\n"
                                     "0000000000000000 t nft_do_chain\t[nf_tables]\n");
  ASSERT_FALSE(parsed.has_value());
  EXPECT_NE(parsed.error().message.find("hidden"), std::string::npos) << parsed.error().message;
}

TEST(Kallsyms, NoFunctionSymbolsIsAnError)
{
  EXPECT_FALSE(KernelSymbols::parse("").has_value());
  EXPECT_FALSE(KernelSymbols::parse("ffffffff82000000 D some_data\n"
                                    "ffffffff82800000 b some_bss\n")
                   .has_value());
}

TEST(Kallsyms, LoadNamesTheFileInErrors)
{
  auto loaded = KernelSymbols::load(data_path("kallsyms/sample.txt"));
  ASSERT_TRUE(loaded.has_value()) << loaded.error().message;
  EXPECT_EQ(loaded->size(), 9u);

  auto missing = KernelSymbols::load(data_path("kallsyms/missing.txt"));
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().message.find("kallsyms/missing.txt"), std::string::npos);

  auto empty = KernelSymbols::load(data_path("maps/sample.txt"));
  ASSERT_FALSE(empty.has_value());
  EXPECT_NE(empty.error().message.find("maps/sample.txt: "), std::string::npos)
      << empty.error().message;
}

TEST(Kallsyms, LoadReadsLargeFilesAcrossChunkBoundaries)
{
  // About 1 MB: many reads, with lines split between them.
  std::string text;
  for (uint64_t i = 0; i < 20000; ++i) {
    char line[128];
    uint64_t address = 0xffffffff81000000 + i * 0x100;
    if (i % 7 == 3)
      std::snprintf(line, sizeof line, "%016llx D data_%llu\n",
                    static_cast<unsigned long long>(address), static_cast<unsigned long long>(i));
    else if (i % 5 == 0)
      std::snprintf(line, sizeof line, "%016llx t function_with_a_longer_name_%llu\t[mod%llu]\n",
                    static_cast<unsigned long long>(address), static_cast<unsigned long long>(i),
                    static_cast<unsigned long long>(i % 3));
    else
      std::snprintf(line, sizeof line, "%016llx T function_with_a_longer_name_%llu\n",
                    static_cast<unsigned long long>(address), static_cast<unsigned long long>(i));
    text += line;
  }
  flamebpf::testing::TempDir dir;
  flamebpf::testing::write_file(dir.path() / "kallsyms", text);
  auto loaded = KernelSymbols::load((dir.path() / "kallsyms").string());
  ASSERT_TRUE(loaded.has_value()) << loaded.error().message;
  auto parsed = KernelSymbols::parse(text);
  ASSERT_TRUE(parsed.has_value()) << parsed.error().message;
  ASSERT_EQ(loaded->size(), parsed->size());

  size_t functions = 0;
  for (uint64_t i = 0; i < 20000; ++i) {
    uint64_t address = 0xffffffff81000000 + i * 0x100;
    auto symbol = loaded->lookup(address + 0x80);
    ASSERT_TRUE(symbol.has_value()) << i;
    if (i % 7 == 3) {
      // A data symbol: the function before it covers its range.
      EXPECT_EQ(symbol->address, address - 0x100) << i;
      continue;
    }
    ++functions;
    EXPECT_EQ(symbol->address, address);
    EXPECT_EQ(symbol->name, "function_with_a_longer_name_" + std::to_string(i));
    EXPECT_EQ(symbol->module, i % 5 == 0 ? "mod" + std::to_string(i % 3) : "") << i;
    auto same = parsed->lookup(address + 0x80);
    ASSERT_TRUE(same.has_value());
    EXPECT_EQ(same->name, symbol->name);
    EXPECT_EQ(same->module, symbol->module);
  }
  EXPECT_EQ(loaded->size(), functions);
}

TEST(Kallsyms, LookupsSurviveAMove)
{
  auto parsed = KernelSymbols::parse(flamebpf::testing::read_data("kallsyms/sample.txt"));
  ASSERT_TRUE(parsed.has_value());
  KernelSymbols moved = std::move(*parsed);
  auto symbol = moved.lookup(0xffffffffc0a01080);
  ASSERT_TRUE(symbol.has_value());
  EXPECT_EQ(symbol->name, "nft_do_chain");
  EXPECT_EQ(symbol->module, "nf_tables");
}

TEST(PrintedSymbol, NameModuleOrNothing)
{
  std::string name;
  std::string module;
  parse_printed_symbol("do_syscall_64", name, module);
  EXPECT_EQ(name, "do_syscall_64");
  EXPECT_EQ(module, "");
  parse_printed_symbol("nft_do_chain [nf_tables]", name, module);
  EXPECT_EQ(name, "nft_do_chain");
  EXPECT_EQ(module, "nf_tables");
  // No symbol covers the address: %ps prints the address itself.
  parse_printed_symbol("0xffffffffc0a81234", name, module);
  EXPECT_EQ(name, "");
  parse_printed_symbol("", name, module);
  EXPECT_EQ(name, "");
  // A bracket that is not a module suffix stays part of the name.
  parse_printed_symbol("odd[name]", name, module);
  EXPECT_EQ(name, "odd[name]");
  EXPECT_EQ(module, "");
}

} // namespace
} // namespace flamebpf::symbolize
