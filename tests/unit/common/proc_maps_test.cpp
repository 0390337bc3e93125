#include <fstream>
#include <gtest/gtest.h>
#include <sstream>

#include "common/proc_maps.h"
#include "test_support.h"

namespace flamebpf::procfs {
namespace {

using flamebpf::testing::read_data;

class ProcMapsSample : public ::testing::Test {
protected:
  void SetUp() override { mappings_ = parse_proc_maps(read_data("maps/sample.txt")); }

  std::vector<Mapping> mappings_;
};

TEST_F(ProcMapsSample, SkipsMalformedLines)
{
  // 18 lines: 11 mappings; a sentence, end before start, no '-', a bad offset, 3-letter
  // permissions, a non-numeric inode and a device without ':' are skipped.
  ASSERT_EQ(mappings_.size(), 11u);
  for (const auto& mapping : mappings_)
    EXPECT_LT(mapping.start, mapping.end) << mapping.path;
}

TEST_F(ProcMapsSample, PieExecutable)
{
  ASSERT_GE(mappings_.size(), 3u);
  const Mapping& text = mappings_[1];
  EXPECT_EQ(text.start, 0x55d0c2a02000u);
  EXPECT_EQ(text.end, 0x55d0c2a05000u);
  EXPECT_EQ(text.offset, 0x2000u);
  EXPECT_TRUE(text.executable);
  EXPECT_EQ(text.device_major, 0xfdu);
  EXPECT_EQ(text.device_minor, 0x01u);
  EXPECT_EQ(text.inode, 1311u);
  EXPECT_EQ(text.path, "/usr/bin/burner");
  EXPECT_TRUE(text.file_backed());

  EXPECT_FALSE(mappings_[0].executable);
  EXPECT_EQ(mappings_[0].path, "/usr/bin/burner");
  EXPECT_FALSE(mappings_[2].executable);
}

TEST_F(ProcMapsSample, HeapIsNotFileBacked)
{
  const Mapping& heap = mappings_.at(3);
  EXPECT_EQ(heap.path, "[heap]");
  EXPECT_EQ(heap.inode, 0u);
  EXPECT_FALSE(heap.executable);
  EXPECT_FALSE(heap.file_backed());
}

TEST_F(ProcMapsSample, Libc)
{
  const Mapping& libc = mappings_.at(5);
  EXPECT_EQ(libc.start, 0x7f1c2a028000u);
  EXPECT_EQ(libc.end, 0x7f1c2a1bd000u);
  EXPECT_EQ(libc.offset, 0x28000u);
  EXPECT_TRUE(libc.executable);
  EXPECT_EQ(libc.inode, 2228u);
  EXPECT_EQ(libc.path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
  EXPECT_TRUE(libc.file_backed());
}

TEST_F(ProcMapsSample, AnonymousExecutableMemory)
{
  const Mapping& jit = mappings_.at(6);
  EXPECT_EQ(jit.start, 0x7f1c2b000000u);
  EXPECT_TRUE(jit.executable);
  EXPECT_EQ(jit.inode, 0u);
  EXPECT_EQ(jit.path, ""); // the trailing space is not a path
  EXPECT_FALSE(jit.file_backed());
}

TEST_F(ProcMapsSample, PathWithSpacesAndHexDevice)
{
  const Mapping& plugin = mappings_.at(7);
  EXPECT_EQ(plugin.path, "/opt/my app/lib plugin.so");
  EXPECT_EQ(plugin.device_major, 0x103u);
  EXPECT_EQ(plugin.device_minor, 0x02u);
  EXPECT_EQ(plugin.offset, 0x1000u);
  EXPECT_TRUE(plugin.file_backed());
}

TEST_F(ProcMapsSample, DeletedFileKeepsTheMarker)
{
  const Mapping& deleted = mappings_.at(8);
  EXPECT_EQ(deleted.path, "/tmp/jit-old.so (deleted)");
  EXPECT_EQ(deleted.inode, 5151u);
  EXPECT_TRUE(deleted.file_backed());
}

TEST_F(ProcMapsSample, VdsoAndVsyscall)
{
  const Mapping& vdso = mappings_.at(9);
  EXPECT_EQ(vdso.path, "[vdso]");
  EXPECT_TRUE(vdso.executable);
  EXPECT_FALSE(vdso.file_backed());

  // The last line has no trailing newline.
  const Mapping& vsyscall = mappings_.at(10);
  EXPECT_EQ(vsyscall.start, 0xffffffffff600000u);
  EXPECT_EQ(vsyscall.end, 0xffffffffff601000u);
  EXPECT_EQ(vsyscall.path, "[vsyscall]");
  EXPECT_TRUE(vsyscall.executable);
  EXPECT_FALSE(vsyscall.file_backed());
}

TEST(ProcMaps, EmptyText)
{
  EXPECT_TRUE(parse_proc_maps("").empty());
  EXPECT_TRUE(parse_proc_maps("\n\n").empty());
}

TEST(ProcMaps, SelfMapsHaveExecutableCode)
{
  std::ifstream in("/proc/self/maps");
  std::ostringstream text;
  text << in.rdbuf();
  auto mappings = parse_proc_maps(text.str());
  ASSERT_FALSE(mappings.empty());
  bool any_executable_file = false;
  for (const auto& mapping : mappings)
    any_executable_file |= mapping.executable && mapping.file_backed();
  EXPECT_TRUE(any_executable_file);
}

} // namespace
} // namespace flamebpf::procfs
