#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include "perf_map_writer.h"
#include "test_support.h"

namespace flamebpf::agent {
namespace {

using flamebpf::testing::TempDir;

std::string contents(const std::string& path)
{
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

TEST(PerfMapLine, HexWithoutPrefix)
{
  EXPECT_EQ(perf_map_line(0x7f01d0ac8800, 0xb8, "Hot.work(long)"),
            "7f01d0ac8800 b8 Hot.work(long)\n");
}

TEST(PerfMapWriter, AppendsWholeLines)
{
  TempDir dir;
  PerfMapWriter writer;
  ASSERT_TRUE(writer.open(dir.path().string(), 42));
  EXPECT_EQ(writer.path(), dir.path().string() + "/perf-42.map");
  writer.add(0x1000, 0x40, "A.a()");
  writer.add(0x2000, 0x10, "Interpreter");
  EXPECT_EQ(contents(writer.path()), "1000 40 A.a()\n2000 10 Interpreter\n");
  EXPECT_EQ(writer.file_bytes(), contents(writer.path()).size());
}

TEST(PerfMapWriter, KeepsAnEarlierMapAndRefusesALink)
{
  TempDir dir;
  std::string path = dir.path().string() + "/perf-7.map";
  std::ofstream(path) << "500 10 Old.m()\n";
  PerfMapWriter writer;
  ASSERT_TRUE(writer.open(dir.path().string(), 7));
  writer.add(0x600, 0x10, "New.m()");
  EXPECT_EQ(contents(path), "500 10 Old.m()\n600 10 New.m()\n");

  std::filesystem::create_symlink(path, dir.path() / "perf-8.map");
  PerfMapWriter linked;
  EXPECT_FALSE(linked.open(dir.path().string(), 8));
  ::mkfifo((dir.path() / "perf-9.map").c_str(), 0600);
  PerfMapWriter fifo;
  EXPECT_FALSE(fifo.open(dir.path().string(), 9));
}

TEST(PerfMapWriter, RewritesWhenUnloadedCodeIsMostOfTheFile)
{
  TempDir dir;
  PerfMapWriter writer;
  ASSERT_TRUE(writer.open(dir.path().string(), 1));
  // Methods of two pieces each (an inlined stretch), then most of them unloaded.
  std::string name(60, 'x');
  uint64_t methods = 2000;
  for (uint64_t i = 0; i < methods; ++i) {
    uint64_t start = 0x100000 + i * 0x100;
    writer.add(start, 0x100,
               {{start, 0x80, "M" + std::to_string(i) + "." + name},
                {start + 0x80, 0x80, "M" + std::to_string(i) + ".inl"}});
  }
  ASSERT_GT(writer.file_bytes(), PerfMapWriter::kMinCompactBytes);
  uint64_t before = writer.file_bytes();
  for (uint64_t i = 0; i < methods; ++i) {
    if (i % 10 != 0)
      writer.remove(0x100000 + i * 0x100);
  }
  EXPECT_GE(writer.compactions(), 1u);
  std::string text = contents(writer.path());
  EXPECT_EQ(text.size(), writer.file_bytes());
  // Every live method keeps both of its lines, in order; unloaded ones are at most half the file.
  uint64_t live_bytes = 0;
  for (uint64_t i = 0; i < methods; i += 10) {
    std::string start = std::to_string(0x100000 + i * 0x100);
    std::string first = "M" + std::to_string(i) + "." + name + "\n";
    std::string second = "M" + std::to_string(i) + ".inl\n";
    ASSERT_NE(text.find(first), std::string::npos) << i;
    ASSERT_NE(text.find(second), std::string::npos) << i;
    EXPECT_LT(text.find(first), text.find(second));
    live_bytes += perf_map_line(0, 0x80, first.substr(0, first.size() - 1)).size() +
                  perf_map_line(0, 0x80, second.substr(0, second.size() - 1)).size();
  }
  // Below the rewrite threshold the file may hold dead lines; above it, dead lines never
  // outweigh live ones (the estimate's hex widths differ a little from the real lines).
  if (text.size() >= PerfMapWriter::kMinCompactBytes) {
    EXPECT_LE(text.size(), 2 * live_bytes + 800);
  }
  EXPECT_LT(text.size(), before / 4);
  // No temporary file is left beside the map.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
  // Appending goes on into the rewritten file.
  writer.add(0x900000, 0x10, "After.m()");
  EXPECT_TRUE(contents(writer.path()).ends_with("900000 10 After.m()\n"));
}

TEST(PerfMapWriter, SmallMapsAreNeverRewritten)
{
  TempDir dir;
  PerfMapWriter writer;
  ASSERT_TRUE(writer.open(dir.path().string(), 1));
  for (uint64_t i = 0; i < 10; ++i)
    writer.add(0x1000 + i * 0x100, 0x10, "A.m()");
  for (uint64_t i = 0; i < 10; ++i)
    writer.remove(0x1000 + i * 0x100);
  EXPECT_EQ(writer.compactions(), 0u);
  std::string text = contents(writer.path());
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 10);
}

TEST(PerfMapWriter, CodeReplacedAtTheSameAddressCountsAsDead)
{
  TempDir dir;
  PerfMapWriter writer;
  ASSERT_TRUE(writer.open(dir.path().string(), 1));
  std::string name(100, 'y');
  // The same address recompiled over and over (no unload event in between).
  for (int round = 0; round < 2000; ++round)
    writer.add(0x5000, 0x40, name + std::to_string(round));
  writer.add(0x6000, 0x40, "Other.m()");
  writer.remove(0x6000);
  EXPECT_GE(writer.compactions(), 1u);
  std::string text = contents(writer.path());
  EXPECT_NE(text.find(name + "1999\n"), std::string::npos);
  EXPECT_EQ(text.find("Other.m()"), std::string::npos);
}

} // namespace
} // namespace flamebpf::agent
