#include <cctype>
#include <fcntl.h>
#include <gelf.h>
#include <gtest/gtest.h>
#include <libelf.h>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "common/contained_file.h"
#include "symbolize/demangle.h"
#include "symbolize/elf_symbols.h"
#include "test_elf.h"
#include "test_support.h"

namespace flamebpf::symbolize {
namespace {

using flamebpf::testing::FixtureElf;

// The debug root dir, as the ELF file's own root.
std::vector<DebugRoot> root_at(const std::string& dir)
{
  std::vector<DebugRoot> roots;
  auto fd = open_directory(dir);
  EXPECT_TRUE(fd.has_value()) << dir;
  if (fd)
    roots.push_back({std::move(*fd), kResolveInRoot, dir, true});
  return roots;
}

// Symbols of the ELF file at path (inside root), its debug file looked for in root.
std::unique_ptr<ElfSymbols>
open_symbols(const std::string& path, const std::string& root = "/", const std::string& inside = "")
{
  std::string full = root == "/" ? path : root + path;
  auto symbols = ElfSymbols::open(UniqueFd(::open(full.c_str(), O_RDONLY | O_CLOEXEC)),
                                  inside.empty() ? path : inside, root_at(root), full);
  EXPECT_TRUE(symbols.has_value()) << symbols.error().message;
  return symbols ? std::move(*symbols) : nullptr;
}

// Checks that every byte position worth testing in function `symbol` of the fixture at path
// symbolizes to `expected`, with the right offset into the function.
void expect_function(const FixtureElf& file,
                     const ElfSymbols& symbols,
                     const std::string& symbol,
                     const std::string& expected)
{
  SCOPED_TRACE(symbol);
  auto entry = file.symbol(symbol);
  ASSERT_TRUE(entry.has_value()) << "fixture lacks " << symbol;
  ASSERT_EQ(GELF_ST_TYPE(entry->st_info), STT_FUNC);
  ASSERT_GE(entry->st_size, 8u) << "fixture function too small to probe inside";
  auto offset = file.vaddr_to_offset(entry->st_value);
  ASSERT_TRUE(offset.has_value());
  for (uint64_t k : {uint64_t{0}, uint64_t{1}, entry->st_size / 2, entry->st_size - 1}) {
    auto name = symbols.symbolize_file_offset(*offset + k);
    EXPECT_EQ(name, expected) << "at offset 0x" << std::hex << *offset + k;
    auto match = symbols.match_file_offset(*offset + k);
    ASSERT_TRUE(match.has_value());
    EXPECT_EQ(match->offset, k);
  }
}

TEST(ElfSymbols, PlainLibraryFunctions)
{
  const std::string path = FLAMEBPF_ELF_FIXTURE_PLAIN;
  FixtureElf file(path);
  ASSERT_TRUE(file.valid()) << path;
  auto symbols = open_symbols(path);
  ASSERT_NE(symbols, nullptr);
  expect_function(file, *symbols, "fb_fixture_alpha", "fb_fixture_alpha");
  expect_function(file, *symbols, "fb_fixture_beta", "fb_fixture_beta");
}

TEST(ElfSymbols, SegmentWhoseVaddrDiffersFromItsOffset)
{
  const std::string path = FLAMEBPF_ELF_FIXTURE_SHIFTED;
  FixtureElf file(path);
  ASSERT_TRUE(file.valid()) << path;
  // The fixture must really exercise the translation: its code segment has p_vaddr != p_offset.
  auto compute = file.symbol("_ZN10fb_fixture7shifted7computeEi");
  ASSERT_TRUE(compute.has_value());
  auto code = file.load_of(compute->st_value);
  ASSERT_TRUE(code.has_value());
  ASSERT_TRUE(code->p_flags & PF_X);
  ASSERT_NE(code->p_vaddr, code->p_offset);
  const GElf_Phdr first = file.loads().front();
  ASSERT_NE(code->p_vaddr - code->p_offset, first.p_vaddr - first.p_offset);

  auto symbols = open_symbols(path);
  ASSERT_NE(symbols, nullptr);
  expect_function(file, *symbols, "_ZN10fb_fixture7shifted7computeEi",
                  "fb_fixture::shifted::compute(int)");
  expect_function(file, *symbols, "fb_fixture_gamma", "fb_fixture_gamma");
}

TEST(ElfSymbols, OffsetsOutsideEveryLoadSegment)
{
  for (const std::string path : {FLAMEBPF_ELF_FIXTURE_PLAIN, FLAMEBPF_ELF_FIXTURE_SHIFTED}) {
    SCOPED_TRACE(path);
    FixtureElf file(path);
    ASSERT_TRUE(file.valid());
    struct stat status {};
    ASSERT_EQ(::stat(path.c_str(), &status), 0);
    auto file_size = static_cast<uint64_t>(status.st_size);
    auto symbols = open_symbols(path);
    ASSERT_NE(symbols, nullptr);

    EXPECT_EQ(symbols->symbolize_file_offset(file_size + 0x1000), std::nullopt);
    EXPECT_EQ(symbols->symbolize_file_offset(~uint64_t{0}), std::nullopt);
    // The section header table ends the file and is never loaded.
    ASSERT_FALSE(file.offset_loaded(file_size - 1));
    EXPECT_EQ(symbols->symbolize_file_offset(file_size - 1), std::nullopt);
    EXPECT_EQ(symbols->match_file_offset(file_size - 1), std::nullopt);
  }
}

TEST(ElfSymbols, BuildIdIsTheNoteInHex)
{
  for (const std::string path : {FLAMEBPF_ELF_FIXTURE_PLAIN, FLAMEBPF_ELF_FIXTURE_SHIFTED}) {
    SCOPED_TRACE(path);
    auto symbols = open_symbols(path);
    ASSERT_NE(symbols, nullptr);
    const std::string& id = symbols->build_id();
    ASSERT_FALSE(id.empty());
    EXPECT_EQ(id.size() % 2, 0u);
    for (char c : id)
      EXPECT_TRUE(std::isxdigit(static_cast<unsigned char>(c)) && !std::isupper(c)) << id;
    EXPECT_EQ(id, FixtureElf(path).build_id());
  }
  EXPECT_NE(open_symbols(FLAMEBPF_ELF_FIXTURE_PLAIN)->build_id(),
            open_symbols(FLAMEBPF_ELF_FIXTURE_SHIFTED)->build_id());
}

// Symbols of a stripped copy of the plain fixture, its debug file looked for in debug_root.
std::unique_ptr<ElfSymbols> open_stripped(const std::string& variant, const std::string& debug_root)
{
  std::string path = std::string(FLAMEBPF_ELF_DEBUG_FIXTURES) + "/" + variant + "/libfixture.so";
  std::vector<DebugRoot> roots;
  if (auto fd = open_directory(debug_root))
    roots.push_back({std::move(*fd), kResolveInRoot, debug_root, true});
  auto symbols =
      ElfSymbols::open(UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC)), path, roots, path);
  EXPECT_TRUE(symbols.has_value()) << symbols.error().message;
  return symbols ? std::move(*symbols) : nullptr;
}

TEST(ElfSymbols, StrippedFileUsesTheDebugFileNamedByGnuDebuglink)
{
  FixtureElf unstripped(FLAMEBPF_ELF_FIXTURE_PLAIN);
  ASSERT_TRUE(unstripped.valid());
  auto symbols = open_stripped("debuglink", "/");
  ASSERT_NE(symbols, nullptr);
  // Stripping keeps the code where it was, so the unstripped file's offsets hold.
  expect_function(unstripped, *symbols, "fb_fixture_hidden", "fb_fixture_hidden");
  expect_function(unstripped, *symbols, "fb_fixture_alpha", "fb_fixture_alpha");
}

TEST(ElfSymbols, StrippedFileUsesTheDebugFileFoundByBuildId)
{
  FixtureElf unstripped(FLAMEBPF_ELF_FIXTURE_PLAIN);
  ASSERT_TRUE(unstripped.valid());
  auto symbols = open_stripped("buildid", std::string(FLAMEBPF_ELF_DEBUG_FIXTURES) + "/buildid");
  ASSERT_NE(symbols, nullptr);
  expect_function(unstripped, *symbols, "fb_fixture_hidden", "fb_fixture_hidden");
}

TEST(ElfSymbols, StrippedFileWithoutDebugFileKeepsOnlyExportedNames)
{
  FixtureElf unstripped(FLAMEBPF_ELF_FIXTURE_PLAIN);
  ASSERT_TRUE(unstripped.valid());
  auto symbols = open_stripped("stripped", "/nonexistent");
  ASSERT_NE(symbols, nullptr);
  expect_function(unstripped, *symbols, "fb_fixture_alpha", "fb_fixture_alpha");
  auto hidden = unstripped.symbol("fb_fixture_hidden");
  ASSERT_TRUE(hidden.has_value());
  auto offset = unstripped.vaddr_to_offset(hidden->st_value);
  ASSERT_TRUE(offset.has_value());
  EXPECT_NE(symbols->symbolize_file_offset(*offset + 1), "fb_fixture_hidden")
      << "the hidden function's name can only come from a debug file";
}

TEST(ElfSymbols, NotAnElfFileIsAnError)
{
  std::string path = flamebpf::testing::data_path("kallsyms/sample.txt");
  auto symbols =
      ElfSymbols::open(UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC)), path, {}, path);
  ASSERT_FALSE(symbols.has_value());
  EXPECT_NE(symbols.error().message.find(path), std::string::npos) << symbols.error().message;
}

// libdwfl reads a reported file into memory and closes the descriptor it was given. ElfSymbols
// must not close that number again: by then it may belong to another file of the process.
TEST(ElfSymbols, DoesNotCloseADescriptorItNoLongerOwns)
{
  const std::string path = FLAMEBPF_ELF_FIXTURE_PLAIN;
  auto symbols = open_symbols(path);
  ASSERT_NE(symbols, nullptr);
  // Takes the lowest free number: the one given to open() above if it was closed meanwhile.
  UniqueFd bystander(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(bystander.valid());
  symbols.reset();
  EXPECT_NE(::fcntl(bystander.get(), F_GETFD), -1)
      << "destroying ElfSymbols closed descriptor " << bystander.get() << " it did not own";
}

TEST(Demangle, ItaniumNames)
{
  EXPECT_EQ(demangle("_ZN10fb_fixture7shifted7computeEi"), "fb_fixture::shifted::compute(int)");
  EXPECT_EQ(demangle("_ZNSt6vectorIiSaIiEE9push_backERKi"),
            "std::vector<int, std::allocator<int> >::push_back(int const&)");
  EXPECT_EQ(demangle("_Z1fv"), "f()");
}

TEST(Demangle, OtherNamesUnchanged)
{
  EXPECT_EQ(demangle("main"), "main");
  EXPECT_EQ(demangle("fb_fixture_alpha"), "fb_fixture_alpha");
  EXPECT_EQ(demangle(""), "");
  EXPECT_EQ(demangle("_"), "_");
  EXPECT_EQ(demangle("_Z"), "_Z");
  EXPECT_EQ(demangle("_Zinvalid@@"), "_Zinvalid@@");
  EXPECT_EQ(demangle("_RNvCs1234_4core3foo"), "_RNvCs1234_4core3foo"); // Rust v0: not Itanium
}

} // namespace
} // namespace flamebpf::symbolize
