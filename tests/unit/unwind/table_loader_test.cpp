#include <algorithm>
#include <chrono>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <future>
#include <gtest/gtest.h>
#include <iterator>
#include <map>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "common/elf_reader.h"
#include "temp_dir.h"
#include "test_support.h"
#include "unwind/table_loader.h"
#include "wait.h"

// Rows compare field by field (the ABI struct has no operator of its own).
static bool operator==(const fb_unwind_row& a, const fb_unwind_row& b)
{
  return a.pc_offset == b.pc_offset && a.kind == b.kind && a.fp_offset_words == b.fp_offset_words &&
         a.cfa_offset == b.cfa_offset;
}

namespace flamebpf::unwind {
namespace {

// The sampler's maps, in memory.
class FakeMaps final : public TableMaps {
public:
  FakeMaps(uint32_t rows, uint32_t tables) : rows_(rows), tables_(tables) {}

  uint32_t row_capacity() const override { return static_cast<uint32_t>(rows_.size()); }
  uint32_t table_capacity() const override { return static_cast<uint32_t>(tables_.size()); }
  Result<> write_rows(uint32_t first_row, std::span<const fb_unwind_row> rows) override
  {
    EXPECT_LE(first_row + rows.size(), rows_.size());
    std::copy(rows.begin(), rows.end(), rows_.begin() + first_row);
    events.push_back("rows");
    return {};
  }
  Result<> set_table(uint32_t slot, const fb_unwind_table& table) override
  {
    EXPECT_LT(slot, tables_.size());
    tables_.at(slot) = table;
    events.push_back(table.row_count ? "table" : "free");
    return {};
  }
  Result<> set_image(const fb_image_key& image, const fb_image_mappings& mappings) override
  {
    images[{image.tgid, image.image_id}] = mappings;
    events.push_back("image");
    return {};
  }
  const fb_image_mappings& image(uint32_t pid, uint32_t image_id)
  {
    return images[{pid, image_id}];
  }
  bool has_image(uint32_t pid, uint32_t image_id) const { return images.contains({pid, image_id}); }

  void remove_image(const fb_image_key& image) override
  {
    images.erase({image.tgid, image.image_id});
  }

  // The rows a mapping's table holds, as the program finds them.
  std::vector<fb_unwind_row> rows_of(const fb_unwind_mapping& mapping) const
  {
    const auto& table = tables_.at(mapping.table);
    return {rows_.begin() + table.first_row, rows_.begin() + table.first_row + table.row_count};
  }
  size_t live_slots() const
  {
    return std::count_if(tables_.begin(), tables_.end(),
                         [](const auto& table) { return table.row_count > 0; });
  }

  std::map<std::pair<uint32_t, uint32_t>, fb_image_mappings> images;
  std::vector<std::string> events;

private:
  std::vector<fb_unwind_row> rows_;
  std::vector<fb_unwind_table> tables_;
};

// The mappings of an image that have tables, in order (code without one is installed too, so
// that its pcs are no misses).
std::vector<fb_unwind_mapping> tabled(const fb_image_mappings& image)
{
  std::vector<fb_unwind_mapping> found;
  for (uint32_t i = 0; i < image.count; ++i)
    if (image.mappings[i].table_base != FB_NO_TABLE_BASE)
      found.push_back(image.mappings[i]);
  return found;
}

fb_unwind_row row(uint32_t pc_offset, uint8_t kind, int16_t cfa_offset = 0)
{
  return {pc_offset, kind, 0, cfa_offset};
}

// A JIT's table for its code at base: one row of code, then the frame pointer.
UnwindTable code_table(uint64_t base)
{
  UnwindTable table;
  table.base_address = base;
  table.rows = {row(0, FB_UNWIND_CFA_SP, 16), row(0x100, FB_UNWIND_FRAME_POINTER)};
  return table;
}

// Tables by file path: what a file's CFI would give.
struct FakeFiles {
  std::map<std::string, FileTable> tables;
  std::map<std::string, int> builds;

  FileTableBuilder builder()
  {
    return [this](const std::string&, const procfs::Mapping& mapping) -> Result<FileTable> {
      ++builds[mapping.path];
      auto it = tables.find(mapping.path);
      if (it == tables.end())
        return fail(error("no CFI"));
      return it->second;
    };
  }
};

FileTable file_table(uint64_t content_key, size_t rows)
{
  FileTable table;
  table.content_key = content_key;
  table.table.base_address = 0x1000;
  for (size_t i = 0; i + 1 < rows; ++i)
    table.table.rows.push_back(row(static_cast<uint32_t>(i * 16), FB_UNWIND_CFA_SP, 8));
  table.table.rows.push_back(row(static_cast<uint32_t>(rows * 16), FB_UNWIND_FRAME_POINTER));
  // One load segment: file offset 0x1000 at virtual address 0x1000.
  table.segments.push_back({0x1000, 0x1000, 0x10000});
  return table;
}

class TableLoaderTest : public ::testing::Test {
protected:
  void write_maps(uint32_t pid, const std::string& text)
  {
    auto dir = proc_.path() / std::to_string(pid);
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "maps") << text;
  }

  testing::TempDir proc_;
  FakeMaps maps_{1000, 16};
  FakeFiles files_;
};

constexpr const char* kLibcAndApp =
    "555555554000-555555555000 r--p 00000000 08:01 100 /usr/bin/app\n"
    "555555555000-555555556000 r-xp 00001000 08:01 100 /usr/bin/app\n"
    "7ffff7c00000-7ffff7c10000 r-xp 00001000 08:01 200 /usr/lib/libc.so.6\n"
    "7ffff7fc1000-7ffff7fc3000 r-xp 00000000 00:00 0 [vdso]\n"
    "7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0 [stack]\n";

TEST_F(TableLoaderTest, InstallsEachExecutableMappingWithItsLoadBias)
{
  files_.tables["/usr/bin/app"] = file_table(1, 3);
  files_.tables["/usr/lib/libc.so.6"] = file_table(2, 5);
  write_maps(42, kLibcAndApp); // [vdso] has no table here: it fails, is counted, and is skipped
  TableLoader loader(maps_, proc_.path().string(), files_.builder());
  loader.on_process_seen(42, 7);

  ASSERT_TRUE(maps_.has_image(42, 7));
  auto image = tabled(maps_.image(42, 7));
  ASSERT_EQ(image.size(), 2u);
  EXPECT_EQ(image[0].start, 0x555555555000u);
  EXPECT_EQ(image[0].end, 0x555555556000u);
  // Offset 0x1000 is virtual address 0x1000, so the bias is start - 0x1000; plus the table's base.
  EXPECT_EQ(image[0].table_base, 0x555555555000u - 0x1000 + 0x1000);
  EXPECT_EQ(image[1].start, 0x7ffff7c00000u);
  EXPECT_EQ(maps_.rows_of(image[0]), files_.tables["/usr/bin/app"].table.rows);
  EXPECT_EQ(maps_.rows_of(image[1]), files_.tables["/usr/lib/libc.so.6"].table.rows);
  // The vDSO is installed without a table: its pcs are known code, no miss.
  const auto& all = maps_.image(42, 7);
  ASSERT_EQ(all.count, 3u);
  EXPECT_EQ(all.mappings[2].start, 0x7ffff7fc1000u);
  EXPECT_EQ(all.mappings[2].end, 0x7ffff7fc3000u);
  EXPECT_EQ(all.mappings[2].table_base, FB_NO_TABLE_BASE);
  EXPECT_EQ(loader.counts().files_built, 2u);
  EXPECT_EQ(loader.counts().files_failed, 1u);
  EXPECT_EQ(loader.rows_used(), 8u);
  // Rows and slots are in place before the image points at them.
  EXPECT_EQ(maps_.events.back(), "image");
}

// lld packs load segments without page alignment in the file: the code segment starts in the page
// where the read-only one ends, so its mapping's offset lies inside that one too; the bias is the
// code segment's.
TEST_F(TableLoaderTest, SegmentsThatShareAFilePageGetTheirOwnBias)
{
  FileTable table = file_table(1, 3);
  table.table.base_address = 0x13b50;
  table.segments = {
      {0, 0, 0x12b50, false}, {0x12b50, 0x13b50, 0x3d180, true}, {0x4fcd0, 0x51cd0, 0x26c8, false}};
  files_.tables["/usr/bin/rust"] = table;
  write_maps(42, "555555554000-555555567000 r--p 00000000 08:01 300 /usr/bin/rust\n"
                 "555555567000-5555555a5000 r-xp 00012000 08:01 300 /usr/bin/rust\n");
  TableLoader loader(maps_, proc_.path().string(), files_.builder());
  loader.on_process_seen(42, 7);
  ASSERT_TRUE(maps_.has_image(42, 7));
  const auto& image = maps_.image(42, 7);
  ASSERT_EQ(image.count, 1u);
  // The code segment's first page (virtual 0x13000) is mapped at 0x555555567000.
  EXPECT_EQ(image.mappings[0].table_base, 0x555555554000u + 0x13b50);
}

// A process's own code unwinds from its table while its libraries' tables are still being built;
// an image already installed keeps all of its mappings while one more library's table is built.
TEST_F(TableLoaderTest, FirstLoadInstallsEachTableAsItIsBuiltAndReloadsKeepTheirMappings)
{
  files_.tables["/usr/bin/app"] = file_table(1, 3);
  files_.tables["/usr/lib/libc.so.6"] = file_table(2, 5);
  files_.tables["/usr/lib/libm.so.6"] = file_table(3, 4);
  write_maps(42, kLibcAndApp);
  std::vector<uint32_t> installed_while_building; // mappings the image had at each library's build
  auto builder = files_.builder();
  TableLoader loader(maps_, proc_.path().string(),
                     [&](const std::string& dir, const procfs::Mapping& mapping) {
                       if (mapping.path.starts_with("/usr/lib/"))
                         installed_while_building.push_back(
                             maps_.has_image(42, 7) ? tabled(maps_.image(42, 7)).size() : 0);
                       return builder(dir, mapping);
                     });
  loader.on_process_seen(42, 7);
  EXPECT_EQ(installed_while_building, std::vector<uint32_t>{1});
  ASSERT_EQ(tabled(maps_.image(42, 7)).size(), 2u);

  // libm is loaded later: while its table is built, app and libc stay installed.
  write_maps(42, std::string(kLibcAndApp) +
                     "7ffff7d00000-7ffff7d10000 r-xp 00001000 08:01 300 /usr/lib/libm.so.6\n");
  loader.on_mapping_missed(42, 7);
  EXPECT_EQ(installed_while_building, (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(tabled(maps_.image(42, 7)).size(), 3u);
}

TEST_F(TableLoaderTest, ProcessesShareOneTablePerContentAndTheLastUserLeavesItIdle)
{
  files_.tables["/usr/lib/libc.so.6"] = file_table(2, 5);
  // Another container's copy of the same library: another inode and path, the same CFI.
  files_.tables["/other/libc.so.6"] = file_table(2, 5);
  write_maps(1, "7ffff7c00000-7ffff7c10000 r-xp 00001000 08:01 200 /usr/lib/libc.so.6\n");
  write_maps(2, "7ffff7a00000-7ffff7a10000 r-xp 00001000 08:01 200 /usr/lib/libc.so.6\n");
  write_maps(3, "7ffff7b00000-7ffff7b10000 r-xp 00001000 00:2a 900 /other/libc.so.6\n");
  TableLoader loader(maps_, proc_.path().string(), files_.builder());
  loader.on_process_seen(1, 1);
  loader.on_process_seen(2, 1);
  loader.on_process_seen(3, 1);

  EXPECT_EQ(files_.builds["/usr/lib/libc.so.6"], 1); // the second process's libc is not read again
  EXPECT_EQ(loader.counts().files_built, 1u);
  EXPECT_EQ(loader.live_tables(), 1u);
  EXPECT_EQ(loader.table_users(2), 3u);
  EXPECT_EQ(loader.rows_used(), 5u);
  EXPECT_EQ(maps_.image(1, 1).mappings[0].table, maps_.image(3, 1).mappings[0].table);

  loader.forget_image(1, 1);
  loader.forget_image(2, 1);
  EXPECT_EQ(loader.table_users(2), 1u);
  EXPECT_EQ(maps_.live_slots(), 1u);
  EXPECT_FALSE(maps_.has_image(1, 1));
  EXPECT_EQ(loader.known_files(), 2u);
  loader.forget_image(3, 1);
  EXPECT_EQ(loader.live_tables(), 0u);
  EXPECT_EQ(loader.rows_used(), 0u);
  EXPECT_TRUE(maps_.images.empty());
  // Idle: still in the maps, and found again without a build by the next run of the program.
  EXPECT_EQ(loader.idle_tables(), 1u);
  EXPECT_EQ(loader.idle_rows(), 5u);
  EXPECT_EQ(maps_.live_slots(), 1u);
  write_maps(4, "7ffff7c00000-7ffff7c10000 r-xp 00001000 08:01 200 /usr/lib/libc.so.6\n");
  loader.on_process_seen(4, 1);
  EXPECT_EQ(files_.builds["/usr/lib/libc.so.6"], 1);
  EXPECT_EQ(loader.table_users(2), 1u);
  EXPECT_EQ(loader.idle_tables(), 0u);
  EXPECT_EQ(loader.rows_used(), 5u);
  loader.forget_image(4, 1);
  EXPECT_EQ(loader.idle_tables(), 1u);
}

// Copies of a file in other containers' images (other inodes, other devices) are known by what
// the build of the first read of it, reading only that: one that holds other CFI is built on its
// own, one that differs only where the build never read (its symbol names) shares the table.
TEST_F(TableLoaderTest, CopiesAreKnownByWhatTheFirstBuildReadWithoutTheirCfiDecoded)
{
  auto root = proc_.path() / "1" / "root" / "lib";
  std::filesystem::create_directories(root);
  std::ifstream in(FLAMEBPF_ELF_FIXTURE_PLAIN, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto elf = testing::open_elf(FLAMEBPF_ELF_FIXTURE_PLAIN);
  ASSERT_TRUE(elf);
  const ElfSection* eh_frame = elf->reader.section_named(".eh_frame");
  ASSERT_NE(eh_frame, nullptr);
  ASSERT_GT(eh_frame->size, 64u);
  std::string renamed = bytes;
  for (size_t at = renamed.find("fb_fixture_alpha"); at != std::string::npos;
       at = renamed.find("fb_fixture_alpha", at + 1))
    renamed.replace(at, 16, "fb_fixture_evil!");
  std::string other_cfi = bytes;
  other_cfi[eh_frame->offset + eh_frame->size / 2] ^= 0x40;
  std::ofstream(root / "a.so", std::ios::binary) << bytes;
  std::ofstream(root / "copy.so", std::ios::binary) << bytes;
  std::ofstream(root / "renamed.so", std::ios::binary) << renamed;
  std::ofstream(root / "other-cfi.so", std::ios::binary) << other_cfi;
  TableLoader loader(maps_, proc_.path().string());
  uint32_t pid = 1;
  auto load = [&](const char* name) {
    struct stat status {};
    ASSERT_EQ(::stat((root / name).c_str(), &status), 0);
    write_maps(pid, fmt::format("7ffff7c00000-7ffff7c10000 r-xp 00000000 00:{:x} {} /lib/{}\n", pid,
                                status.st_ino, name));
    // Every process sees the files of process 1's root.
    if (pid != 1)
      std::filesystem::create_directory_symlink(proc_.path() / "1" / "root",
                                                proc_.path() / std::to_string(pid) / "root");
    loader.on_process_seen(pid, 1);
    ++pid;
  };

  load("a.so");
  EXPECT_EQ(loader.counts().files_built, 1u);
  load("copy.so");
  load("renamed.so");
  EXPECT_EQ(loader.counts().files_replayed, 2u);
  EXPECT_EQ(loader.live_tables(), 1u);
  load("other-cfi.so");
  EXPECT_EQ(loader.counts().files_replayed, 2u);
  EXPECT_EQ(maps_.image(2, 1).mappings[0].table, maps_.image(1, 1).mappings[0].table);
  EXPECT_EQ(maps_.image(3, 1).mappings[0].table, maps_.image(1, 1).mappings[0].table);

  EXPECT_EQ(loader.live_tables(), 2u);
}

// Idle tables hold at most kMaxIdleRows, the longest idle freed first (and the files behind
// them forgotten, so that new containers' inodes do not pile up), and make room for a table in
// use.
TEST_F(TableLoaderTest, IdleTablesAreBoundedAndMakeRoom)
{
  constexpr uint32_t kBig = TableLoader::kMaxIdleRows / 2 + 1; // two of them do not fit idle
  FakeMaps maps(3 * kBig, 16);
  for (uint32_t i = 0; i < 3; ++i) {
    std::string path = "/usr/bin/tool" + std::to_string(i);
    files_.tables[path] = file_table(10 + i, kBig);
    write_maps(20 + i,
               fmt::format("555555555000-555555556000 r-xp 00001000 08:01 {} {}\n", 300 + i, path));
  }
  TableLoader loader(maps, proc_.path().string(), files_.builder());
  loader.on_process_seen(20, 1);
  loader.on_process_seen(21, 1);
  loader.forget_image(20, 1);
  EXPECT_EQ(loader.idle_tables(), 1u);
  loader.forget_image(21, 1);
  // tool0's table, the longest idle, went for tool1's.
  EXPECT_EQ(loader.idle_tables(), 1u);
  EXPECT_EQ(loader.idle_rows(), kBig);
  EXPECT_EQ(loader.known_files(), 1u);

  // The rows are all taken but for tool1's idle table: tool2's table takes its place.
  files_.tables["/usr/bin/tool2"] = file_table(12, 2 * kBig + 1);
  write_maps(22, "555555555000-555555556000 r-xp 00001000 08:01 302 /usr/bin/tool2\n");
  loader.on_process_seen(22, 1);
  EXPECT_EQ(loader.counts().files_no_room, 0u);
  EXPECT_EQ(loader.idle_tables(), 0u);
  EXPECT_EQ(loader.rows_used(), 2 * kBig + 1);
}

TEST_F(TableLoaderTest, AFileThatStallsHoldsNothingUpAndIsUsedOnceItAnswers)
{
  files_.tables["/usr/bin/app"] = file_table(1, 3);
  files_.tables["/usr/lib/libc.so.6"] = file_table(2, 5);
  write_maps(42, kLibcAndApp);
  // libc's file system stops answering until the test lets it go.
  std::promise<void> answer;
  std::shared_future<void> answered = answer.get_future().share();
  auto plain = files_.builder();
  FileTableBuilder stalling = [plain, answered](const std::string& process_dir,
                                                const procfs::Mapping& mapping) {
    if (mapping.path == "/usr/lib/libc.so.6")
      answered.wait();
    return plain(process_dir, mapping);
  };
  TableLoader loader(maps_, proc_.path().string(), stalling);
  auto started = std::chrono::steady_clock::now();
  loader.on_process_seen(42, 7);
  auto took = std::chrono::steady_clock::now() - started;

  // The image goes in with the files that answered; libc waits.
  EXPECT_LT(took, TableLoader::kStallLimit * 3);
  EXPECT_EQ(loader.counts().files_stalled, 1u);
  ASSERT_TRUE(maps_.has_image(42, 7));
  EXPECT_EQ(tabled(maps_.image(42, 7)).size(), 1u);
  // Asked again while it still stalls: not read a second time, nothing waits.
  loader.on_mapping_missed(42, 7);
  EXPECT_EQ(loader.counts().files_stalled, 1u);
  EXPECT_EQ(tabled(maps_.image(42, 7)).size(), 1u);

  answer.set_value();
  ASSERT_TRUE(testing::wait_until(
      [&] {
        loader.on_mapping_missed(42, 7);
        return tabled(maps_.image(42, 7)).size() == 2;
      },
      std::chrono::seconds(10), "libc's table to be built"));
  EXPECT_EQ(loader.counts().files_built, 2u);
}

TEST_F(TableLoaderTest, AnImageWithoutRowsStaysOnTheFramePointerPath)
{
  FileTable frame_pointer_only;
  frame_pointer_only.content_key = 5;
  frame_pointer_only.table.rows.push_back(row(0, FB_UNWIND_FRAME_POINTER));
  frame_pointer_only.segments.push_back({0x1000, 0x1000, 0x10000});
  files_.tables["/usr/bin/app"] = frame_pointer_only;
  write_maps(9, "555555555000-555555556000 r-xp 00001000 08:01 100 /usr/bin/app\n");
  TableLoader loader(maps_, proc_.path().string(), files_.builder());
  loader.on_process_seen(9, 1);
  EXPECT_TRUE(maps_.images.empty());
  EXPECT_EQ(loader.rows_used(), 0u);
}

TEST_F(TableLoaderTest, AMissReadsTheMapsAgainAndPicksUpALoadedLibrary)
{
  files_.tables["/usr/bin/app"] = file_table(1, 3);
  files_.tables["/usr/lib/libplugin.so"] = file_table(3, 4);
  write_maps(5, "555555555000-555555556000 r-xp 00001000 08:01 100 /usr/bin/app\n");
  TableLoader loader(maps_, proc_.path().string(), files_.builder());
  loader.on_process_seen(5, 1);
  ASSERT_EQ(maps_.image(5, 1).count, 1u);

  write_maps(5, "555555555000-555555556000 r-xp 00001000 08:01 100 /usr/bin/app\n"
                "7ffff7000000-7ffff7010000 r-xp 00001000 08:01 300 /usr/lib/libplugin.so\n");
  loader.on_mapping_missed(5, 1);
  EXPECT_EQ(maps_.image(5, 1).count, 2u);
  EXPECT_EQ(maps_.image(5, 1).missed, 0u);
  EXPECT_EQ(loader.counts().maps_rereads, 1u);
  EXPECT_EQ(loader.table_users(1), 1u); // read again, the app's table is not counted twice

  // The plugin is unloaded: its table goes with the next read.
  write_maps(5, "555555555000-555555556000 r-xp 00001000 08:01 100 /usr/bin/app\n");
  loader.on_mapping_missed(5, 1);
  EXPECT_EQ(loader.table_users(3), 0u);
  EXPECT_EQ(loader.rows_used(), 3u);
}

// A pc in code that has no table (a JIT's anonymous code, a file without CFI) is no miss: that
// code is installed too, in the places the tables leave, and a reread is for new mappings only.
TEST_F(TableLoaderTest, CodeWithoutTablesIsInstalledAroundTheTables)
{
  files_.tables["/usr/bin/java"] = file_table(1, 3);
  write_maps(8, "555555555000-555555556000 r-xp 00001000 08:01 100 /usr/bin/java\n"
                "7f0000000000-7f0000040000 rwxp 00000000 00:00 0 \n"
                "7f0000040000-7f0000100000 rwxp 00000000 00:00 0 \n"
                "7f1000000000-7f1000010000 r-xp 00001000 08:01 400 /usr/lib/libnocfi.so\n"
                "7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0 [stack]\n");
  TableLoader loader(maps_, proc_.path().string(), files_.builder());
  loader.on_process_seen(8, 1);
  // The JIT's code table lies inside its anonymous code.
  UnwindTable code = code_table(0x7f0000010000);
  ASSERT_TRUE(loader.install_code_table(8, 1, 0x7f0000010000, 0x7f0000020000, code));

  const auto& image = maps_.image(8, 1);
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  std::vector<bool> with_table;
  for (uint32_t i = 0; i < image.count; ++i) {
    ranges.emplace_back(image.mappings[i].start, image.mappings[i].end);
    with_table.push_back(image.mappings[i].table_base != FB_NO_TABLE_BASE);
  }
  // The two adjacent anonymous mappings are one range, cut by the code table.
  EXPECT_EQ(ranges, (std::vector<std::pair<uint64_t, uint64_t>>{{0x555555555000, 0x555555556000},
                                                                {0x7f0000000000, 0x7f0000010000},
                                                                {0x7f0000010000, 0x7f0000020000},
                                                                {0x7f0000020000, 0x7f0000100000},
                                                                {0x7f1000000000, 0x7f1000010000}}));
  EXPECT_EQ(with_table, (std::vector<bool>{true, false, true, false, false}));
}

TEST_F(TableLoaderTest, TablesTakeThePlacesFirst)
{
  files_.tables["/usr/bin/app"] = file_table(1, 3);
  std::string maps;
  // More separate pieces of anonymous code than an image has places, below the program.
  for (uint64_t i = 0; i < FB_MAX_IMAGE_MAPPINGS + 10; ++i)
    maps += fmt::format("{:x}-{:x} r-xp 00000000 00:00 0 \n", 0x100000 + i * 0x2000,
                        0x101000 + i * 0x2000);
  maps += "555555555000-555555556000 r-xp 00001000 08:01 100 /usr/bin/app\n";
  write_maps(3, maps);
  TableLoader loader(maps_, proc_.path().string(), files_.builder());
  loader.on_process_seen(3, 1);
  const auto& image = maps_.image(3, 1);
  EXPECT_EQ(image.count, uint32_t{FB_MAX_IMAGE_MAPPINGS});
  ASSERT_EQ(tabled(image).size(), 1u);
  EXPECT_EQ(tabled(image)[0].start, 0x555555555000u);
}

// A pc that is no code (a return address read from a stack gone wrong) makes a miss that a reread
// cannot explain: the misses after it are let pass, more of them after each such reread, and a
// reread that finds a new library starts the count again.
TEST_F(TableLoaderTest, MissesAfterAFruitlessRereadAreLetPass)
{
  files_.tables["/usr/bin/app"] = file_table(1, 3);
  files_.tables["/usr/lib/libplugin.so"] = file_table(3, 4);
  write_maps(5, "555555555000-555555556000 r-xp 00001000 08:01 100 /usr/bin/app\n");
  TableLoader loader(maps_, proc_.path().string(), files_.builder());
  loader.on_process_seen(5, 1);

  // Which of 40 misses read the maps again.
  std::vector<int> rereads;
  for (int miss = 0; miss < 40; ++miss) {
    auto before = loader.counts().maps_rereads;
    loader.on_mapping_missed(5, 1);
    if (loader.counts().maps_rereads != before)
      rereads.push_back(miss);
  }
  // 1, 3, 7, then 15 misses let pass after each fruitless reread.
  EXPECT_EQ(rereads, (std::vector<int>{0, 2, 6, 14, 30}));
  EXPECT_EQ(loader.counts().maps_rereads_fruitless, 5u);
  EXPECT_EQ(loader.counts().misses_let_pass, 35u);

  // A library loaded meanwhile is found at the next reread, and the count starts again.
  write_maps(5, "555555555000-555555556000 r-xp 00001000 08:01 100 /usr/bin/app\n"
                "7ffff7000000-7ffff7010000 r-xp 00001000 08:01 300 /usr/lib/libplugin.so\n");
  int misses = 0;
  while (tabled(maps_.image(5, 1)).size() < 2 && misses < 20) {
    loader.on_mapping_missed(5, 1);
    ++misses;
  }
  EXPECT_EQ(tabled(maps_.image(5, 1)).size(), 2u);
  EXPECT_LE(misses, int{TableLoader::kMaxMissesLetPass} + 1);
  auto rereads_before = loader.counts().maps_rereads;
  loader.on_mapping_missed(5, 1);
  EXPECT_EQ(loader.counts().maps_rereads, rereads_before + 1);
}

TEST_F(TableLoaderTest, AFullRowArrayLeavesNewFilesToFramePointers)
{
  FakeMaps small(6, 16);
  files_.tables["/usr/bin/app"] = file_table(1, 4);
  files_.tables["/usr/lib/libc.so.6"] = file_table(2, 5);
  write_maps(42, kLibcAndApp);
  TableLoader loader(small, proc_.path().string(), files_.builder());
  loader.on_process_seen(42, 1);
  EXPECT_EQ(loader.counts().files_no_room, 1u);
  ASSERT_EQ(tabled(small.image(42, 1)).size(), 1u);
  EXPECT_EQ(tabled(small.image(42, 1))[0].start, 0x555555555000u);

  // Room made by the exit: the next process gets libc's table.
  loader.forget_image(42, 1);
  write_maps(43, "7ffff7c00000-7ffff7c10000 r-xp 00001000 08:01 200 /usr/lib/libc.so.6\n");
  loader.on_process_seen(43, 1);
  EXPECT_EQ(tabled(small.image(43, 1)).size(), 1u);
}

TEST_F(TableLoaderTest, ACodeTableIsReplacedWholeAfterItsRowsAreWritten)
{
  write_maps(77, "");
  TableLoader loader(maps_, proc_.path().string(), files_.builder());
  loader.on_process_seen(77, 1);
  UnwindTable code = code_table(0x7f0000000000);
  ASSERT_TRUE(loader.install_code_table(77, 1, 0x7f0000000000, 0x7f0000001000, code));
  const auto& first = maps_.image(77, 1);
  ASSERT_EQ(first.count, 1u);
  EXPECT_EQ(first.mappings[0].table_base, 0x7f0000000000u);
  uint32_t first_slot = first.mappings[0].table;

  maps_.events.clear();
  code.rows = {row(0, FB_UNWIND_CFA_SP, 32), row(0x80, FB_UNWIND_CFA_SP, 8),
               row(0x100, FB_UNWIND_FRAME_POINTER)};
  ASSERT_TRUE(loader.install_code_table(77, 1, 0x7f0000000000, 0x7f0000001000, code));
  EXPECT_EQ(maps_.events, (std::vector<std::string>{"rows", "table", "image", "free"}));
  const auto& second = maps_.image(77, 1);
  EXPECT_NE(second.mappings[0].table, first_slot);
  EXPECT_EQ(maps_.rows_of(second.mappings[0]), code.rows);
  EXPECT_EQ(loader.rows_used(), 3u);

  loader.forget_image(77, 1);
  EXPECT_EQ(loader.rows_used(), 0u);
  EXPECT_EQ(maps_.live_slots(), 0u);
}

TEST_F(TableLoaderTest, QueuedImagesLoadOldestFirstAndAnExitLeavesTheQueue)
{
  files_.tables["/usr/bin/app"] = file_table(1, 3);
  for (uint32_t pid : {11u, 12u, 13u})
    write_maps(pid, "555555555000-555555556000 r-xp 00001000 08:01 100 /usr/bin/app\n");
  TableLoader loader(maps_, proc_.path().string(), files_.builder());
  loader.queue_process(11, 1);
  loader.queue_process(12, 1);
  loader.queue_process(13, 1);
  EXPECT_TRUE(maps_.images.empty()); // nothing is read until the pipeline has time for it
  // A deadline already past loads nothing.
  EXPECT_TRUE(loader.load_queued(std::chrono::steady_clock::now() - std::chrono::seconds(1)));
  EXPECT_TRUE(maps_.images.empty());
  loader.forget_image(12, 1); // exited while queued
  EXPECT_FALSE(loader.load_queued(std::chrono::steady_clock::now() + std::chrono::hours(1)));
  EXPECT_TRUE(maps_.has_image(11, 1));
  EXPECT_FALSE(maps_.has_image(12, 1));
  EXPECT_TRUE(maps_.has_image(13, 1));
  EXPECT_EQ(loader.table_users(1), 2u);
}

} // namespace
} // namespace flamebpf::unwind
