// How ElfCache opens the file behind a mapping: through /proc/<pid>/map_files, else by the
// mapping's path inside the process's root, and only the mapping's own file.
#include <cerrno>
#include <chrono>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <gtest/gtest.h>
#include <iterator>
#include <string>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <thread>
#include <unistd.h>

#include "common/procfs.h"
#include "symbolize/process_table.h"
#include "test_elf.h"
#include "test_support.h"

namespace flamebpf::symbolize {
namespace {

namespace fs = std::filesystem;
using flamebpf::testing::FixtureElf;
using flamebpf::testing::TempDir;

constexpr uint32_t kPid = 4242;

// A fake /proc holding process kPid, with no map_files: ElfCache falls back to the mapping's path
// inside kPid's root.
class ElfCacheFallback : public ::testing::Test {
protected:
  void SetUp() override
  {
    root_ = dir_.path() / "proc" / std::to_string(kPid) / "root";
    fs::create_directories(root_ / "lib");
  }

  // A copy of the plain fixture at path (absolute, outside any root unless below root_).
  static void copy_fixture(const fs::path& path)
  {
    fs::create_directories(path.parent_path());
    fs::copy_file(FLAMEBPF_ELF_FIXTURE_PLAIN, path, fs::copy_options::overwrite_existing);
  }

  // An executable mapping of the whole file with inode number inode, at path in the process.
  static procfs::Mapping mapping_of(const std::string& path, uint64_t inode)
  {
    procfs::Mapping mapping;
    mapping.start = 0x7f0000000000;
    mapping.end = 0x7f0000004000;
    mapping.executable = true;
    mapping.device_major = 8;
    mapping.inode = inode;
    mapping.path = path;
    return mapping;
  }

  static uint64_t inode_of(const fs::path& path)
  {
    struct stat status {};
    EXPECT_EQ(::stat(path.c_str(), &status), 0) << path;
    return status.st_ino;
  }

  // Whether the symbols name fb_fixture_alpha where the fixture has it.
  static bool names_alpha(const ElfSymbols& symbols)
  {
    FixtureElf fixture(FLAMEBPF_ELF_FIXTURE_PLAIN);
    auto alpha = fixture.symbol("fb_fixture_alpha");
    auto offset = alpha ? fixture.vaddr_to_offset(alpha->st_value) : std::nullopt;
    return offset && symbols.symbolize_file_offset(*offset + 1) == "fb_fixture_alpha";
  }

  std::string proc() const { return (dir_.path() / "proc").string(); }

  TempDir dir_;
  fs::path root_;
};

TEST_F(ElfCacheFallback, OpensTheFileAtItsPathInsideTheRoot)
{
  copy_fixture(root_ / "lib/libfixture.so");
  ElfCache cache(proc());
  auto symbols =
      cache.get(kPid, mapping_of("/lib/libfixture.so", inode_of(root_ / "lib/libfixture.so")));
  ASSERT_NE(symbols, nullptr);
  EXPECT_TRUE(names_alpha(*symbols));
}

// A file its target's share has no room for stays unnamed until the next trim, and is charged
// to that share once read: a file every process maps costs the account once.
TEST_F(ElfCacheFallback, FileIsChargedToTheShareOfItsFirstProcess)
{
  copy_fixture(root_ / "lib/libfixture.so");
  auto mapping = mapping_of("/lib/libfixture.so", inode_of(root_ / "lib/libfixture.so"));
  auto account = MemoryAccount::create(16 << 20);
  auto crowded = account->share("crowded");
  ASSERT_TRUE(crowded->charge(MemoryKind::kSymbols, (16 << 20) - 64));
  ElfCache cache(proc());
  EXPECT_EQ(cache.get(kPid, mapping, crowded), nullptr);
  crowded->release(MemoryKind::kSymbols, (16 << 20) - 64);
  EXPECT_EQ(cache.get(kPid, mapping, crowded), nullptr); // not retried before the trim
  cache.trim();
  auto symbols = cache.get(kPid, mapping, crowded);
  ASSERT_NE(symbols, nullptr);
  uint64_t held = crowded->held();
  EXPECT_GT(held, 0u);
  EXPECT_EQ(cache.get(kPid, mapping, account->share("other")), symbols);
  EXPECT_EQ(account->held(), held);
  // The file's symbols are charged as symbols (its inline index, once built, as inlines).
  auto breakdown = account->breakdown();
  EXPECT_GT(breakdown.of(MemoryKind::kSymbols), 0u);
  EXPECT_EQ(breakdown.of(MemoryKind::kSymbols) + breakdown.of(MemoryKind::kInlines), held);
  // Names are read from the file when a frame needs them, and charged at the next trim.
  EXPECT_TRUE(names_alpha(*symbols));
  cache.trim();
  EXPECT_GT(crowded->held(), held);
  EXPECT_EQ(crowded->held(), cache.held_bytes());
}

// A name no frame used between two trims (here each trim ends a names period) is given back, and
// read again when a frame meets it.
TEST_F(ElfCacheFallback, NamesNoFrameUsedForAPeriodAreGivenBack)
{
  copy_fixture(root_ / "lib/libfixture.so");
  auto mapping = mapping_of("/lib/libfixture.so", inode_of(root_ / "lib/libfixture.so"));
  auto account = MemoryAccount::create(16 << 20);
  auto share = account->share("target");
  ElfCache cache(proc(), ElfCache::kMaxHeldBytes, ElfCache::kUnusedKeptBytes,
                 std::chrono::seconds(0));
  auto symbols = cache.get(kPid, mapping, share);
  ASSERT_NE(symbols, nullptr);
  uint64_t unnamed = share->held();
  EXPECT_TRUE(names_alpha(*symbols));
  cache.trim(); // used in this period: kept, and charged
  uint64_t named = share->held();
  EXPECT_GT(named, unnamed);
  EXPECT_EQ(cache.held_bytes(), named);
  EXPECT_EQ(symbols->memory_bytes(), named);
  EXPECT_TRUE(names_alpha(*symbols));
  cache.trim(); // used again: kept
  EXPECT_EQ(share->held(), named);
  cache.trim(); // not used for a period: given back
  EXPECT_EQ(share->held(), unnamed);
  EXPECT_EQ(cache.held_bytes(), unnamed);
  EXPECT_EQ(symbols->memory_bytes(), unnamed);
  EXPECT_TRUE(names_alpha(*symbols));
  cache.trim();
  EXPECT_EQ(share->held(), named);
}

// The path names another file than the one mapped (replaced since the maps were read).
TEST_F(ElfCacheFallback, RefusesAFileWithAnotherInode)
{
  copy_fixture(root_ / "lib/libfixture.so");
  ElfCache cache(proc());
  EXPECT_EQ(
      cache.get(kPid, mapping_of("/lib/libfixture.so", inode_of(root_ / "lib/libfixture.so") + 1)),
      nullptr);
}

// An absolute link in the container leads to the container's own file of that path, not the
// host's, even where the host's is the very file mapped.
TEST_F(ElfCacheFallback, LinksResolveInsideTheRoot)
{
  fs::path host_file = dir_.path() / "host/libfixture.so";
  copy_fixture(host_file);
  fs::create_symlink(host_file, root_ / "lib/libfixture.so");
  ElfCache cache(proc());
  EXPECT_EQ(cache.get(kPid, mapping_of("/lib/libfixture.so", inode_of(host_file))), nullptr);
  // Where the link's target exists in the root, that file is the one opened.
  copy_fixture(root_ / host_file.relative_path());
  ElfCache fresh(proc());
  EXPECT_NE(fresh.get(kPid, mapping_of("/lib/libfixture.so",
                                       inode_of(root_ / host_file.relative_path()))),
            nullptr);
}

// A deleted file's path may name anything by now: it is opened through map_files or not at all.
TEST_F(ElfCacheFallback, DeletedFileIsNeverOpenedByItsPath)
{
  copy_fixture(root_ / "lib/libfixture.so (deleted)");
  ElfCache cache(proc());
  EXPECT_EQ(cache.get(kPid, mapping_of("/lib/libfixture.so (deleted)",
                                       inode_of(root_ / "lib/libfixture.so (deleted)"))),
            nullptr);
}

TEST_F(ElfCacheFallback, FifoAtThePathIsNotOpened)
{
  ASSERT_EQ(::mkfifo((root_ / "lib/libfixture.so").c_str(), 0644), 0);
  ElfCache cache(proc());
  // A blocking open would hang here.
  EXPECT_EQ(
      cache.get(kPid, mapping_of("/lib/libfixture.so", inode_of(root_ / "lib/libfixture.so"))),
      nullptr);
}

TEST_F(ElfCacheFallback, HoldsNoMoreSymbolsThanItsBudget)
{
  // Files that name alike share one table (below): these name differently.
  copy_fixture(root_ / "lib/a.so");
  fs::copy_file(FLAMEBPF_ELF_FIXTURE_SHIFTED, root_ / "lib/b.so");
  fs::copy_file(FLAMEBPF_ELF_FIXTURE_SHIFTED, root_ / "lib/c.so");
  auto mapping = [&](const char* name) {
    return mapping_of(std::string("/lib/") + name, inode_of(root_ / "lib" / name));
  };
  // Room for one file's symbols.
  size_t a_bytes = 0;
  size_t b_bytes = 0;
  {
    ElfCache probe(proc());
    a_bytes = probe.get(kPid, mapping("a.so"))->memory_bytes();
    b_bytes = probe.get(kPid, mapping("b.so"))->memory_bytes();
  }
  ElfCache cache(proc(), std::max(a_bytes, b_bytes) + std::min(a_bytes, b_bytes) / 2);
  auto a = cache.get(kPid, mapping("a.so"));
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(cache.held_bytes(), a_bytes);
  // a is in use: b does not fit.
  EXPECT_EQ(cache.get(kPid, mapping("b.so")), nullptr);
  EXPECT_EQ(cache.size(), 1u);
  // Once a is not used any more, it makes room for c.
  a.reset();
  EXPECT_NE(cache.get(kPid, mapping("c.so")), nullptr);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.held_bytes(), b_bytes);
}

// Copies of one file (one image's library in many containers: a different file to the kernel
// each) hold one table, charged once; a file that names differently holds its own. The table goes
// when no copy is used any more.
TEST_F(ElfCacheFallback, CopiesOfOneFileShareOneTable)
{
  copy_fixture(root_ / "lib/a.so");
  copy_fixture(root_ / "lib/copy-of-a.so");
  fs::copy_file(FLAMEBPF_ELF_FIXTURE_SHIFTED, root_ / "lib/other.so");
  auto mapping = [&](const char* name) {
    return mapping_of(std::string("/lib/") + name, inode_of(root_ / "lib" / name));
  };
  auto account = MemoryAccount::create(16 << 20);
  ElfCache cache(proc(), ElfCache::kMaxHeldBytes, 0); // keeps no table no process maps
  auto a = cache.get(kPid, mapping("a.so"), account->share("first"));
  ASSERT_NE(a, nullptr);
  size_t one_table = cache.held_bytes();
  auto copy = cache.get(kPid, mapping("copy-of-a.so"), account->share("second"));
  EXPECT_EQ(copy, a);
  EXPECT_EQ(cache.copies_replayed(), 1u); // known for a copy before it was read
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.tables(), 1u);
  EXPECT_EQ(cache.held_bytes(), one_table);
  EXPECT_EQ(account->held(), one_table);
  auto other = cache.get(kPid, mapping("other.so"));
  ASSERT_NE(other, nullptr);
  EXPECT_NE(other, a);
  EXPECT_EQ(cache.tables(), 2u);
  EXPECT_EQ(cache.held_bytes(), one_table + other->memory_bytes());

  // While one copy is used, the table stays for both; it goes, and is given back once, when
  // neither is.
  a.reset();
  cache.trim();
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_TRUE(names_alpha(*copy));
  copy.reset();
  other.reset();
  // The reading thread lets go of its result a moment after handing it over.
  for (int tries = 0; tries < 1000 && cache.size() > 0; ++tries) {
    cache.trim();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.held_bytes(), 0u);
  EXPECT_EQ(account->held(), 0u);
}

// Copies of one file share the table read from the first; its names stay in that first file. A
// container that then rewrites its copy's names makes the shared table refuse them, not name the
// other copy's frames with them: the cache forgets the table, and each copy is read again.
TEST_F(ElfCacheFallback, ACopyChangedAfterSharingItsTableIsReadAgain)
{
  copy_fixture(root_ / "lib/forger.so");
  copy_fixture(root_ / "lib/victim.so");
  auto mapping = [&](const char* name) {
    return mapping_of(std::string("/lib/") + name, inode_of(root_ / "lib" / name));
  };
  ElfCache cache(proc());
  auto forger = cache.get(kPid, mapping("forger.so"));
  auto victim = cache.get(kPid, mapping("victim.so"));
  ASSERT_NE(forger, nullptr);
  EXPECT_EQ(victim, forger);

  std::string path = (root_ / "lib/forger.so").string();
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (size_t at = bytes.find("fb_fixture_alpha"); at != std::string::npos;
       at = bytes.find("fb_fixture_alpha", at + 1))
    bytes.replace(at, 16, "fb_fixture_evil!");
  flamebpf::testing::write_file(path, bytes);

  EXPECT_FALSE(names_alpha(*victim));
  EXPECT_TRUE(victim->names_changed());
  EXPECT_TRUE(cache.forget_changed());
  EXPECT_FALSE(cache.forget_changed());
  victim = cache.get(kPid, mapping("victim.so"));
  ASSERT_NE(victim, nullptr);
  EXPECT_NE(victim, forger);
  EXPECT_TRUE(names_alpha(*victim));
  EXPECT_EQ(cache.tables(), 1u);
}

// A file of a held table's size is taken for a copy, unread, only when it holds the same bytes
// where reading the table read (its headers, symbol table and names): one whose names differ is
// read, and named by its own; one that differs only in code the table never read shares it.
TEST_F(ElfCacheFallback, ACopyIsKnownUnreadOnlyByTheBytesItsTableWasReadFrom)
{
  copy_fixture(root_ / "lib/a.so");
  std::string path = (root_ / "lib/a.so").string();
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string renamed = bytes;
  for (size_t at = renamed.find("fb_fixture_alpha"); at != std::string::npos;
       at = renamed.find("fb_fixture_alpha", at + 1))
    renamed.replace(at, 16, "fb_fixture_evil!");
  flamebpf::testing::write_file(root_ / "lib/renamed.so", renamed);
  // The first bytes of fb_fixture_alpha's code.
  FixtureElf fixture(FLAMEBPF_ELF_FIXTURE_PLAIN);
  auto alpha = fixture.symbol("fb_fixture_alpha");
  ASSERT_TRUE(alpha);
  auto code = fixture.vaddr_to_offset(alpha->st_value);
  ASSERT_TRUE(code);
  std::string recoded = bytes;
  recoded[*code] = static_cast<char>(0xcc);
  flamebpf::testing::write_file(root_ / "lib/recoded.so", recoded);
  auto mapping = [&](const char* name) {
    return mapping_of(std::string("/lib/") + name, inode_of(root_ / "lib" / name));
  };

  ElfCache cache(proc());
  auto a = cache.get(kPid, mapping("a.so"));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(a->reads(), nullptr); // its own .symtab: its bytes alone made the table
  auto forged = cache.get(kPid, mapping("renamed.so"));
  ASSERT_NE(forged, nullptr);
  EXPECT_NE(forged, a);
  EXPECT_FALSE(names_alpha(*forged));
  EXPECT_EQ(cache.copies_replayed(), 0u);
  auto recoded_symbols = cache.get(kPid, mapping("recoded.so"));
  EXPECT_EQ(recoded_symbols, a);
  EXPECT_EQ(cache.copies_replayed(), 1u);
  EXPECT_TRUE(names_alpha(*a));
  EXPECT_EQ(cache.tables(), 2u);
}

// Files no process maps are kept for processes to come, within a byte budget as well as a count.
TEST_F(ElfCacheFallback, UnusedFilesAreKeptWithinTheirBytes)
{
  copy_fixture(root_ / "lib/a.so");
  fs::copy_file(FLAMEBPF_ELF_FIXTURE_SHIFTED, root_ / "lib/b.so");
  auto mapping = [&](const char* name) {
    return mapping_of(std::string("/lib/") + name, inode_of(root_ / "lib" / name));
  };
  size_t a_bytes = 0;
  {
    ElfCache probe(proc());
    a_bytes = probe.get(kPid, mapping("a.so"))->memory_bytes();
  }
  // Room for a, the newer, alone.
  ElfCache cache(proc(), ElfCache::kMaxHeldBytes, a_bytes);
  cache.get(kPid, mapping("b.so"));
  cache.get(kPid, mapping("a.so"));
  auto still_used = cache.get(kPid, mapping("b.so"));
  cache.trim();
  EXPECT_EQ(cache.size(), 2u); // b is in use
  still_used.reset();
  cache.get(kPid, mapping("a.so"));
  cache.trim();
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.held_bytes(), a_bytes);
}

// The inline index of a file with DWARF, built in the background, counts in the cache's budget;
// where the budget has no room for it, the file keeps its symbols and goes without inlines.
TEST_F(ElfCacheFallback, InlineIndexesCountInTheBudget)
{
  fs::copy_file(std::string(INLINE_SPINNERS_DIR) + "/gcc-dwarf5", root_ / "lib/spinner");
  auto mapping = mapping_of("/lib/spinner", inode_of(root_ / "lib/spinner"));
  auto built = [](ElfCache& cache) {
    for (int tries = 0; tries < 1000 && cache.inline_builds_pending() > 0; ++tries)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    cache.install_inlines();
  };
  size_t symbols_only = 0;
  {
    ElfCache cache(proc());
    auto symbols = cache.get(kPid, mapping);
    ASSERT_NE(symbols, nullptr);
    symbols_only = symbols->memory_bytes();
    EXPECT_EQ(cache.held_bytes(), symbols_only);
    built(cache);
    EXPECT_TRUE(symbols->has_inlines());
    EXPECT_GT(cache.held_bytes(), symbols_only);
  }
  ElfCache cache(proc(), symbols_only);
  auto symbols = cache.get(kPid, mapping);
  ASSERT_NE(symbols, nullptr);
  built(cache);
  EXPECT_FALSE(symbols->has_inlines());
  EXPECT_EQ(cache.held_bytes(), symbols_only);
}

// Through the real /proc: a mapped file that was deleted is still read through map_files.
TEST(ElfCacheMapFiles, DeletedMappedFileIsReadThroughMapFiles)
{
  TempDir dir;
  fs::path copy = dir.path() / "libdeleted.so";
  fs::copy_file(FLAMEBPF_ELF_FIXTURE_PLAIN, copy);
  UniqueFd fd(::open(copy.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(fd.valid());
  size_t size = fs::file_size(copy);
  void* mapped = ::mmap(nullptr, size, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd.get(), 0);
  ASSERT_NE(mapped, MAP_FAILED);
  fs::remove(copy);
  auto start = reinterpret_cast<uint64_t>(mapped);
  std::string link =
      fmt::format("/proc/self/map_files/{:x}-{:x}", start, start + (size + 4095) / 4096 * 4096);
  if (UniqueFd probe(::open(link.c_str(), O_PATH | O_CLOEXEC)); !probe.valid()) {
    ::munmap(mapped, size);
    GTEST_SKIP() << "map_files needs CAP_SYS_ADMIN: " << std::strerror(errno);
  }
  auto maps = procfs::read_file("/proc/self/maps");
  ASSERT_TRUE(maps.has_value());
  std::optional<procfs::Mapping> found;
  for (const auto& mapping : procfs::parse_proc_maps(*maps)) {
    if (mapping.start == start)
      found = mapping;
  }
  ASSERT_TRUE(found.has_value());
  EXPECT_TRUE(found->path.ends_with("libdeleted.so (deleted)")) << found->path;
  ElfCache cache("/proc");
  auto symbols = cache.get(static_cast<uint32_t>(::getpid()), *found);
  ::munmap(mapped, size);
  ASSERT_NE(symbols, nullptr);
  FixtureElf fixture(FLAMEBPF_ELF_FIXTURE_PLAIN);
  auto alpha = fixture.symbol("fb_fixture_alpha");
  ASSERT_TRUE(alpha.has_value());
  EXPECT_EQ(symbols->symbolize_file_offset(*fixture.vaddr_to_offset(alpha->st_value)),
            "fb_fixture_alpha");
}

} // namespace
} // namespace flamebpf::symbolize
