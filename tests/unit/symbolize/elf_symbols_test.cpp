#include <cctype>
#include <chrono>
#include <dlfcn.h>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <gelf.h>
#include <gtest/gtest.h>
#include <iterator>
#include <libelf.h>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "common/contained_file.h"
#include "common/proc_maps.h"
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

// Symbols of the ELF file at path inside root, its debug file looked for in root.
std::unique_ptr<ElfSymbols> open_symbols(const std::string& path, const std::string& root = "/")
{
  std::string full = root == "/" ? path : root + path;
  auto symbols = ElfSymbols::open(UniqueFd(::open(full.c_str(), O_RDONLY | O_CLOEXEC)), path,
                                  root_at(root), full);
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

// flamebpf's own vDSO names its functions where glibc's dynamic linker finds them.
TEST(ElfSymbols, OwnVdsoImageNamesClockGettime)
{
  std::string_view image = procfs::own_vdso_image();
  ASSERT_FALSE(image.empty());
  void* vdso = ::dlopen("linux-vdso.so.1", RTLD_LAZY | RTLD_NOLOAD);
  ASSERT_NE(vdso, nullptr) << ::dlerror();
  void* function = ::dlsym(vdso, "__vdso_clock_gettime");
  ASSERT_NE(function, nullptr) << ::dlerror();
  auto symbols = ElfSymbols::read_image(image, "[vdso]");
  ASSERT_TRUE(symbols) << symbols.error().message;
  uint64_t offset =
      reinterpret_cast<uintptr_t>(function) - reinterpret_cast<uintptr_t>(image.data());
  auto name = (*symbols)->symbolize_file_offset(offset + 4);
  ASSERT_TRUE(name);
  // Its two names share one address.
  EXPECT_TRUE(*name == "__vdso_clock_gettime" || *name == "clock_gettime") << *name;
  ::dlclose(vdso);
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

TEST(ElfSymbols, ThirtyTwoBitLibrary)
{
  const std::string path = FLAMEBPF_ELF_FIXTURE_PLAIN32;
  FixtureElf file(path);
  ASSERT_TRUE(file.valid()) << path;
  auto symbols = open_symbols(path);
  ASSERT_NE(symbols, nullptr);
  EXPECT_EQ(symbols->symbols_from(), ".symtab");
  EXPECT_EQ(symbols->build_id(), file.build_id());
  expect_function(file, *symbols, "fb_fixture_alpha", "fb_fixture_alpha");
  expect_function(file, *symbols, "fb_fixture_hidden", "fb_fixture_hidden");
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

std::string debug_fixture(const std::string& relative)
{
  return std::string(FLAMEBPF_ELF_DEBUG_FIXTURES) + "/" + relative;
}

// Symbols of /lib/libfixture.so in the debug fixture root `root`, its debug file looked for there.
std::unique_ptr<ElfSymbols> open_in_root(const std::string& root)
{
  return open_symbols("/lib/libfixture.so", debug_fixture(root));
}

// The local function fb_fixture_hidden, which only .symtab names, is named, and so is an exported
// one.
void expect_named_from_symtab(const ElfSymbols& symbols)
{
  FixtureElf unstripped(FLAMEBPF_ELF_FIXTURE_PLAIN);
  ASSERT_TRUE(unstripped.valid());
  expect_function(unstripped, symbols, "fb_fixture_hidden", "fb_fixture_hidden");
  expect_function(unstripped, symbols, "fb_fixture_beta", "fb_fixture_beta");
}

std::string build_id_path()
{
  std::string id = FixtureElf(FLAMEBPF_ELF_FIXTURE_PLAIN).build_id();
  return "/usr/lib/debug/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug";
}

TEST(ElfSymbols, UnstrippedFileUsesItsOwnSymtab)
{
  auto symbols = open_symbols(FLAMEBPF_ELF_FIXTURE_PLAIN);
  ASSERT_NE(symbols, nullptr);
  EXPECT_EQ(symbols->symbols_from(), ".symtab");
  EXPECT_TRUE(symbols->problems().empty());
}

TEST(ElfSymbols, DebugLinkBesideTheFile)
{
  auto symbols = open_stripped("debuglink", "/");
  ASSERT_NE(symbols, nullptr);
  EXPECT_EQ(symbols->symbols_from(), debug_fixture("debuglink/libfixture.so.debug"));
}

TEST(ElfSymbols, DebugLinkInTheDotDebugDirectory)
{
  auto symbols = open_in_root("dotdebug");
  ASSERT_NE(symbols, nullptr);
  EXPECT_EQ(symbols->symbols_from(), "/lib/.debug/libfixture.so.debug");
  expect_named_from_symtab(*symbols);
}

TEST(ElfSymbols, DebugLinkUnderUsrLibDebug)
{
  auto symbols = open_in_root("usrdebug");
  ASSERT_NE(symbols, nullptr);
  EXPECT_EQ(symbols->symbols_from(), "/usr/lib/debug/lib/libfixture.so.debug");
  expect_named_from_symtab(*symbols);
}

TEST(ElfSymbols, BuildIdComesBeforeTheDebugLink)
{
  auto symbols = open_in_root("both");
  ASSERT_NE(symbols, nullptr);
  EXPECT_EQ(symbols->symbols_from(), build_id_path());
  expect_named_from_symtab(*symbols);
  EXPECT_TRUE(symbols->problems().empty()) << ::testing::PrintToString(symbols->problems());
}

TEST(ElfSymbols, DebugFileOfAnotherBuildIsRefused)
{
  auto symbols = open_in_root("wrongid");
  ASSERT_NE(symbols, nullptr);
  // Another library's debug file sits at the build-ID path: refused, and the link's one is taken.
  EXPECT_EQ(symbols->symbols_from(), "/lib/libfixture.so.debug");
  expect_named_from_symtab(*symbols);
  ASSERT_EQ(symbols->problems().size(), 1u);
  EXPECT_NE(symbols->problems()[0].find(build_id_path() + ": build ID "), std::string::npos)
      << symbols->problems()[0];
}

TEST(ElfSymbols, DebugFileWithAnotherCrcIsRefused)
{
  auto symbols = open_in_root("badcrc");
  ASSERT_NE(symbols, nullptr);
  EXPECT_EQ(symbols->symbols_from(), ".dynsym");
  ASSERT_EQ(symbols->problems().size(), 1u);
  EXPECT_NE(symbols->problems()[0].find("/lib/libfixture.so.debug: CRC does not match"),
            std::string::npos)
      << symbols->problems()[0];
  FixtureElf unstripped(FLAMEBPF_ELF_FIXTURE_PLAIN);
  auto hidden = unstripped.symbol("fb_fixture_hidden");
  ASSERT_TRUE(hidden.has_value());
  EXPECT_NE(symbols->symbolize_file_offset(*unstripped.vaddr_to_offset(hidden->st_value) + 1),
            "fb_fixture_hidden");
}

TEST(ElfSymbols, MiniDebugInfoNamesTheFunctionsDynsymLacks)
{
  auto symbols = open_stripped("mini", "/nonexistent");
  ASSERT_NE(symbols, nullptr);
  EXPECT_EQ(symbols->symbols_from(), ".gnu_debugdata");
  // fb_fixture_hidden from the MiniDebugInfo, fb_fixture_beta from .dynsym.
  expect_named_from_symtab(*symbols);
  EXPECT_TRUE(symbols->problems().empty()) << ::testing::PrintToString(symbols->problems());
}

TEST(ElfSymbols, XzBombInGnuDebugdataIsRefusedAtItsBudget)
{
  auto started = std::chrono::steady_clock::now();
  auto symbols = open_stripped("xzbomb", "/nonexistent");
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ASSERT_NE(symbols, nullptr);
  EXPECT_EQ(symbols->symbols_from(), ".dynsym");
  ASSERT_EQ(symbols->problems().size(), 1u);
  EXPECT_EQ(symbols->problems()[0],
            ".gnu_debugdata ignored: cannot decompress: more than 33554432 bytes");
  EXPECT_LT(seconds, 2.0);
  FixtureElf unstripped(FLAMEBPF_ELF_FIXTURE_PLAIN);
  expect_function(unstripped, *symbols, "fb_fixture_beta", "fb_fixture_beta");
}

// A table holds one descriptor, of the file its names are in (the file, or its debug file), and
// none once it is gone; a table whose names are in memory (MiniDebugInfo's) holds none.
TEST(ElfSymbols, OneDescriptorIsKeptForTheNamesAndNoneAfter)
{
  auto count = [] {
    size_t n = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
      ++n;
    return n;
  };
  size_t before = count();
  std::vector<std::unique_ptr<ElfSymbols>> kept;
  for (const char* root : {"dotdebug", "usrdebug", "both", "wrongid"})
    kept.push_back(open_in_root(root));
  kept.push_back(open_symbols(FLAMEBPF_ELF_FIXTURE_PLAIN));
  // A file with DWARF holds one descriptor more, of the file checked to be its, until its inline
  // index is built from it (ElfCache hands it to the indexer at once).
  for (auto& symbols : kept) {
    ASSERT_NE(symbols, nullptr);
    symbols->take_inline_source();
  }
  EXPECT_EQ(count(), before + kept.size());
  auto mini = open_stripped("mini", "/nonexistent");
  ASSERT_NE(mini, nullptr);
  EXPECT_EQ(mini->symbols_from(), ".gnu_debugdata");
  mini->take_inline_source();
  EXPECT_EQ(count(), before + kept.size());
  kept.clear();
  mini.reset();
  EXPECT_EQ(count(), before);
}

// Names stay in the file until a frame needs one; a name changed there since the table was read
// names nothing (the table says so, to be read again), and a name read before stays as read.
TEST(ElfSymbols, NameChangedInTheFileSinceReadIsRefused)
{
  flamebpf::testing::TempDir dir;
  std::string path = (dir.path() / "libfixture.so").string();
  std::filesystem::copy_file(FLAMEBPF_ELF_FIXTURE_PLAIN, path);
  auto symbols = open_symbols(path);
  ASSERT_NE(symbols, nullptr);
  FixtureElf fixture(FLAMEBPF_ELF_FIXTURE_PLAIN);
  auto offset_of = [&](const char* name) {
    auto entry = fixture.symbol(name);
    EXPECT_TRUE(entry.has_value()) << name;
    return fixture.vaddr_to_offset(entry->st_value).value_or(0) + 1;
  };
  EXPECT_EQ(symbols->symbolize_file_offset(offset_of("fb_fixture_alpha")), "fb_fixture_alpha");

  // Every copy of each name in the file changes, as a container rewriting its library would.
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const std::string name : {"fb_fixture_alpha", "fb_fixture_beta"}) {
    std::string forged = name;
    forged[forged.size() - 1] = 'X';
    for (size_t at = bytes.find(name); at != std::string::npos; at = bytes.find(name, at + 1))
      bytes.replace(at, name.size(), forged);
  }
  {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    ASSERT_TRUE(fd.valid());
    ASSERT_EQ(::pwrite(fd.get(), bytes.data(), bytes.size(), 0),
              static_cast<ssize_t>(bytes.size()));
  }
  EXPECT_FALSE(symbols->names_changed());
  EXPECT_EQ(symbols->match_file_offset(offset_of("fb_fixture_beta")), std::nullopt);
  EXPECT_TRUE(symbols->names_changed());
  EXPECT_EQ(symbols->symbolize_file_offset(offset_of("fb_fixture_alpha")), "fb_fixture_alpha");
  // Read again, the file names what it holds now.
  auto again = open_symbols(path);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->symbolize_file_offset(offset_of("fb_fixture_beta")), "fb_fixture_betX");
}

// A symbol's name is read from the file only when a frame needs it, and each table holds 16 bytes
// a symbol besides the names it has read: libc's thousands of names cost nothing until used.
TEST(ElfSymbols, NamesAreReadWhenFirstNeeded)
{
  auto symbols = open_symbols(FLAMEBPF_ELF_FIXTURE_PLAIN);
  ASSERT_NE(symbols, nullptr);
  EXPECT_EQ(sizeof(ElfSymbols::Symbol), 16u);
  size_t before = symbols->memory_bytes();
  EXPECT_LT(before, 1024 + symbols->symbol_count() * sizeof(ElfSymbols::Symbol));
  FixtureElf fixture(FLAMEBPF_ELF_FIXTURE_PLAIN);
  auto alpha = fixture.symbol("fb_fixture_alpha");
  ASSERT_TRUE(alpha.has_value());
  EXPECT_EQ(symbols->symbolize_file_offset(*fixture.vaddr_to_offset(alpha->st_value) + 1),
            "fb_fixture_alpha");
  EXPECT_GT(symbols->memory_bytes(), before);
}

// A file that keeps its .symtab but whose DWARF was split off (strip --strip-debug and a
// .gnu_debuglink): named from its own .symtab, its inlined functions from the debug file.
TEST(ElfSymbols, SymtabKeptAndDwarfSplitOffTakesTheDebugFilesInlines)
{
  std::string spinners = INLINE_SPINNERS_DIR;
  auto symbols = open_symbols(spinners + "/gcc-dwarf5.nodebug");
  ASSERT_NE(symbols, nullptr);
  EXPECT_EQ(symbols->symbols_from(), ".symtab");
  auto source = symbols->take_inline_source();
  ASSERT_TRUE(source.has_value());
  EXPECT_NE(source->shown.find("gcc-dwarf5.debug"), std::string::npos) << source->shown;
  // With DWARF of its own, the file is its own source.
  symbols = open_symbols(spinners + "/gcc-dwarf5");
  ASSERT_NE(symbols, nullptr);
  source = symbols->take_inline_source();
  ASSERT_TRUE(source.has_value());
  EXPECT_EQ(source->shown, spinners + "/gcc-dwarf5");
}

TEST(ElfSymbols, NotAnElfFileIsAnError)
{
  std::string path = flamebpf::testing::data_path("kallsyms/sample.txt");
  auto symbols =
      ElfSymbols::open(UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC)), path, {}, path);
  ASSERT_FALSE(symbols.has_value());
  EXPECT_NE(symbols.error().message.find(path), std::string::npos) << symbols.error().message;
}

// ElfSymbols closes the descriptor it was given once it has read the file. It must not close that
// number again later: by then it may belong to another file of the process.
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

} // namespace
} // namespace flamebpf::symbolize
