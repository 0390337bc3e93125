#include <charconv>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/unique_fd.h"
#include "symbolize/perf_map.h"
#include "test_support.h"

namespace flamebpf::symbolize {
namespace {

using flamebpf::testing::read_data;
using flamebpf::testing::TempDir;
using flamebpf::testing::write_file;

// Every entry of a fixture, read as flamebpf reads maps.
PerfMapTable load(const std::string& fixture, uint64_t* bad = nullptr)
{
  TempDir dir;
  std::string proc = dir.path().string();
  write_file(proc + "/7/root/tmp/perf-1.map", read_data("perfmap/" + fixture));
  PerfMapReader reader(7, 1, proc);
  reader.refresh();
  if (bad)
    *bad = reader.bad_lines();
  return reader.table();
}

TEST(PerfMapLine, EveryProducersSpelling)
{
  auto jdk = parse_perf_map_line("0x00007fe79ceca920 0x00000000000000b8 long Hot.work(long)");
  ASSERT_TRUE(jdk.has_value());
  EXPECT_EQ(jdk->start, 0x7fe79ceca920u);
  EXPECT_EQ(jdk->end, 0x7fe79ceca920u + 0xb8);
  EXPECT_EQ(jdk->name, "long Hot.work(long)");
  auto agent = parse_perf_map_line("7faa19403040 210 Hot.work(long)");
  ASSERT_TRUE(agent.has_value());
  EXPECT_EQ(agent->end - agent->start, 0x210u);
  auto spaced = parse_perf_map_line("1000 10 java.lang.Object Foo.bar(java.lang.Object, long)\r");
  ASSERT_TRUE(spaced.has_value());
  EXPECT_EQ(spaced->name, "java.lang.Object Foo.bar(java.lang.Object, long)");
}

TEST(PerfMapLine, MalformedLines)
{
  EXPECT_FALSE(parse_perf_map_line(""));
  EXPECT_FALSE(parse_perf_map_line("1000 10"));
  EXPECT_FALSE(parse_perf_map_line("1000 10 "));
  EXPECT_FALSE(parse_perf_map_line("zz 10 name"));
  EXPECT_FALSE(parse_perf_map_line("1000 0 name"));
  EXPECT_FALSE(parse_perf_map_line("ffffffffffffff00 200 wraps"));
  EXPECT_FALSE(parse_perf_map_line("10000000000000000 1 too.big()"));
}

TEST(PerfMapFixtures, Jdk17AndJdk25CompilerPerfmap)
{
  for (const char* fixture : {"jdk17-compiler-perfmap.map", "jdk25-compiler-perfmap.map"}) {
    uint64_t bad = 0;
    auto table = load(fixture, &bad);
    EXPECT_EQ(bad, 0u) << fixture;
    EXPECT_GE(table.size(), 40u) << fixture;
  }
  auto table = load("jdk17-compiler-perfmap.map");
  const PerfMapEntry* work = table.find(0x00007fe79ceca920 + 0x10);
  ASSERT_NE(work, nullptr);
  EXPECT_EQ(work->name, "long Hot.work(long)");
  const PerfMapEntry* interpreter = table.find(0x00007fe79c940b80 + 0x100);
  ASSERT_NE(interpreter, nullptr);
  EXPECT_EQ(interpreter->name, "Interpreter");
}

TEST(PerfMapFixtures, FlamebpfAgent)
{
  uint64_t bad = 0;
  auto table = load("flamebpf-agent-jdk17.map", &bad);
  EXPECT_EQ(bad, 0u);
  const PerfMapEntry* work = table.find(0x7faa19403040);
  ASSERT_NE(work, nullptr);
  EXPECT_EQ(work->name, "Hot.work(long)");
}

TEST(PerfMapFixtures, PerfMapAgentAndBadLinesCounted)
{
  uint64_t bad = 0;
  auto table = load("perf-map-agent.map", &bad);
  EXPECT_EQ(bad, 4u);
  EXPECT_EQ(table.size(), 8u);
  ASSERT_NE(table.find(0x7f3c2d012a10), nullptr);
  EXPECT_EQ(table.find(0x7f3c2d012a10)->name,
            "Lorg/example/Service;::handle->Lorg/example/Codec;::decode");
  uint64_t malformed_bad = 0;
  auto malformed = load("malformed.map", &malformed_bad);
  EXPECT_EQ(malformed.size(), 2u);
  EXPECT_EQ(malformed_bad, 5u); // the empty line is not counted
}

TEST(PerfMapTable, LaterEntriesWinWhereTheyOverlap)
{
  PerfMapTable table;
  table.insert({0x1000, 0x2000, "old"});
  table.insert({0x1400, 0x1800, "inside"}); // splits "old" in two
  EXPECT_EQ(table.find(0x1000)->name, "old");
  EXPECT_EQ(table.find(0x13ff)->name, "old");
  EXPECT_EQ(table.find(0x1400)->name, "inside");
  EXPECT_EQ(table.find(0x17ff)->name, "inside");
  EXPECT_EQ(table.find(0x1800)->name, "old");
  EXPECT_EQ(table.find(0x1fff)->name, "old");
  EXPECT_EQ(table.find(0x2000), nullptr);
  table.insert({0x0800, 0x1500, "over the start"});
  EXPECT_EQ(table.find(0x1000)->name, "over the start");
  EXPECT_EQ(table.find(0x1500)->name, "inside");
  table.insert({0x0000, 0x3000, "everything"});
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(table.find(0x1fff)->name, "everything");
  EXPECT_EQ(table.find(0x3000), nullptr);
}

class PerfMapReaderTest : public ::testing::Test {
protected:
  std::string proc() const { return dir_.path().string(); }
  std::string map_path() const { return proc() + "/7/root/tmp/perf-1.map"; }
  void append(const std::string& text)
  {
    std::ofstream out(map_path(), std::ios::app);
    out << text;
  }
  TempDir dir_;
};

TEST_F(PerfMapReaderTest, ReadsWhatIsAppendedAndWaitsForWholeLines)
{
  write_file(map_path(), "1000 10 A.a()\n2000 10 B.b");
  PerfMapReader reader(7, 1, proc());
  reader.refresh();
  EXPECT_EQ(reader.table().size(), 1u);
  EXPECT_EQ(reader.table().find(0x2000), nullptr); // the line is not finished yet
  append("()\n1000 10 A.recompiled()\n");
  reader.refresh();
  EXPECT_EQ(reader.table().find(0x2000)->name, "B.b()");
  EXPECT_EQ(reader.table().find(0x1000)->name, "A.recompiled()");
  EXPECT_EQ(reader.bad_lines(), 0u);
}

TEST_F(PerfMapReaderTest, ReplacedOrShrunkFileIsReadAgain)
{
  write_file(map_path(), "1000 10 A.a()\n2000 10 B.b()\n");
  PerfMapReader reader(7, 1, proc());
  reader.refresh();
  EXPECT_EQ(reader.table().size(), 2u);
  // A compaction: a new file renamed over the old one.
  write_file(proc() + "/7/root/tmp/new.map", "2000 10 B.b()\n");
  std::filesystem::rename(proc() + "/7/root/tmp/new.map", map_path());
  reader.refresh();
  EXPECT_EQ(reader.table().size(), 1u);
  EXPECT_EQ(reader.table().find(0x1000), nullptr);
  // Truncated and rewritten in place, shorter.
  std::ofstream(map_path(), std::ios::trunc) << "3000 1 C\n";
  reader.refresh();
  EXPECT_EQ(reader.table().size(), 1u);
  EXPECT_EQ(reader.table().find(0x3000)->name, "C");
}

TEST_F(PerfMapReaderTest, OpenFileIsReadAfterTheProcessIsGone)
{
  write_file(map_path(), "1000 10 A.a()\n");
  PerfMapReader reader(7, 1, proc());
  reader.refresh();
  // The process's last lines, then it exits: its /proc entry (and root) disappear.
  append("2000 10 B.b()\n");
  std::filesystem::rename(proc() + "/7", proc() + "/gone");
  reader.refresh();
  EXPECT_EQ(reader.table().find(0x2000)->name, "B.b()");
  EXPECT_TRUE(reader.found());
}

TEST_F(PerfMapReaderTest, LongLinesAreSkippedAndCounted)
{
  write_file(map_path(),
             "1000 10 " + std::string(PerfMapReader::kMaxLine + 10, 'x') + "\n2000 10 B.b()\n");
  PerfMapReader reader(7, 1, proc());
  reader.refresh();
  EXPECT_EQ(reader.bad_lines(), 1u);
  EXPECT_EQ(reader.table().size(), 1u);
  EXPECT_EQ(reader.table().find(0x2000)->name, "B.b()");
}

TEST_F(PerfMapReaderTest, ManyMegabyteLinesAreSkippedInOneRefresh)
{
  // More bytes of overlong lines than one refresh parses: skipping them is not parsing.
  std::string line_of_a_megabyte = "1000 10 " + std::string(1 << 20, 'x') + "\n";
  std::string text;
  for (int i = 0; i < 40; ++i)
    text += line_of_a_megabyte;
  write_file(map_path(), text + "2000 10 B.b()\n");
  PerfMapReader reader(7, 1, proc());
  reader.refresh();
  EXPECT_EQ(reader.bad_lines(), 40u);
  ASSERT_NE(reader.table().find(0x2000), nullptr);
  EXPECT_EQ(reader.table().find(0x2000)->name, "B.b()");
}

TEST_F(PerfMapReaderTest, HoleOfASparseFileIsSkippedUnread)
{
  write_file(map_path(), "1000 10 A.a()\n");
  {
    // A terabyte of NULs (one endless line), then a line: reading the hole would take minutes.
    UniqueFd fd(::open(map_path().c_str(), O_WRONLY));
    ASSERT_TRUE(fd.valid());
    std::string tail = "\n2000 10 B.b()\n";
    ASSERT_EQ(::pwrite(fd.get(), tail.data(), tail.size(), off_t{1} << 40),
              static_cast<ssize_t>(tail.size()));
  }
  PerfMapReader reader(7, 1, proc());
  reader.refresh();
  EXPECT_EQ(reader.bad_lines(), 1u);
  ASSERT_EQ(reader.table().size(), 2u);
  EXPECT_EQ(reader.table().find(0x1000)->name, "A.a()");
  EXPECT_EQ(reader.table().find(0x2000)->name, "B.b()");
}

TEST_F(PerfMapReaderTest, EntriesBeyondTheCapAreIgnoredAndCounted)
{
  std::string text;
  char start[32];
  for (size_t i = 0; i < PerfMapReader::kMaxEntries + 5; ++i) {
    auto end = std::to_chars(start, start + sizeof start, 0x10000 + i * 0x10, 16).ptr;
    text += std::string(start, end) + " 10 F" + std::to_string(i) + "\n";
  }
  write_file(map_path(), text);
  PerfMapReader reader(7, 1, proc());
  reader.refresh();
  EXPECT_EQ(reader.table().size(), PerfMapReader::kMaxEntries);
  EXPECT_EQ(reader.ignored_lines(), 5u);
  EXPECT_EQ(reader.bad_lines(), 0u);
}

TEST_F(PerfMapReaderTest, HostileFilesAreNotRead)
{
  std::filesystem::create_directories(proc() + "/7/root/tmp");
  write_file(proc() + "/host-secret.map", "1000 10 Secret.leaked()\n");
  // An absolute link resolves inside the process's root, where the target does not exist.
  std::filesystem::create_symlink(proc() + "/host-secret.map", map_path());
  PerfMapReader linked(7, 1, proc());
  linked.refresh();
  EXPECT_FALSE(linked.found());
  EXPECT_EQ(linked.table().size(), 0u);
  std::filesystem::remove(map_path());
  ASSERT_EQ(::mkfifo(map_path().c_str(), 0600), 0);
  PerfMapReader fifo(7, 1, proc()); // must not block
  fifo.refresh();
  EXPECT_FALSE(fifo.found());
}

} // namespace
} // namespace flamebpf::symbolize
