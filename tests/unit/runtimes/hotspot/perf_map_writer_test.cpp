#include <algorithm>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <sys/inotify.h>
#include <sys/resource.h>
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

TEST(PerfMapWriter, AnEarlierMapIsReplacedByAFileOfItsOwnNeverAppendedTo)
{
  TempDir dir;
  std::string path = dir.path().string() + "/perf-7.map";
  std::ofstream(path) << "500 10 Old.m()\n";
  // A second name keeps the earlier file, to see that nothing was written to it.
  std::string kept = dir.path().string() + "/kept";
  ASSERT_EQ(::link(path.c_str(), kept.c_str()), 0);
  PerfMapWriter writer;
  ASSERT_TRUE(writer.open(dir.path().string(), 7)) << writer.open_error();
  writer.add(0x600, 0x10, "New.m()");
  EXPECT_EQ(contents(path), "600 10 New.m()\n");
  EXPECT_EQ(contents(kept), "500 10 Old.m()\n");
  EXPECT_EQ(writer.file_bytes(), contents(path).size());
  // Nothing else is left beside it.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 2);
}

TEST(PerfMapWriter, ALinkOrFifoAtTheNameIsReplacedWithoutBeingFollowedOrOpened)
{
  TempDir dir;
  std::string victim = dir.path().string() + "/victim";
  std::ofstream(victim) << "victim\n";
  std::filesystem::create_symlink(victim, dir.path() / "perf-8.map");
  ASSERT_EQ(::mkfifo((dir.path() / "perf-9.map").c_str(), 0600), 0);
  int watch = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  ASSERT_GE(::inotify_add_watch(watch, dir.path().c_str(), IN_OPEN), 0);

  PerfMapWriter linked;
  ASSERT_TRUE(linked.open(dir.path().string(), 8)) << linked.open_error();
  linked.add(0x800, 0x10, "Linked.m()");
  PerfMapWriter fifo;
  ASSERT_TRUE(fifo.open(dir.path().string(), 9)) << fifo.open_error();
  fifo.add(0x900, 0x10, "Fifo.m()");

  // Only the writers' own new files were opened (created), never the victim or the FIFO.
  alignas(inotify_event) char buffer[4096];
  for (ssize_t n; (n = ::read(watch, buffer, sizeof buffer)) > 0;) {
    for (char* at = buffer; at < buffer + n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(at);
      // An event without a name is of the directory itself.
      std::string name = event->len > 0 ? event->name : "";
      EXPECT_TRUE(name.empty() || name.starts_with(".perf-8.map.") ||
                  name.starts_with(".perf-9.map."))
          << name;
      at += sizeof(inotify_event) + event->len;
    }
  }
  ::close(watch);
  EXPECT_EQ(contents(victim), "victim\n");
  EXPECT_FALSE(std::filesystem::is_symlink(dir.path() / "perf-8.map"));
  EXPECT_EQ(contents(linked.path()), "800 10 Linked.m()\n");
  EXPECT_TRUE(std::filesystem::is_regular_file(dir.path() / "perf-9.map"));
  EXPECT_EQ(contents(fifo.path()), "900 10 Fifo.m()\n");
}

TEST(PerfMapWriter, WhatCannotBeReplacedIsSaid)
{
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "perf-10.map" / "inside");
  PerfMapWriter writer;
  EXPECT_FALSE(writer.open(dir.path().string(), 10));
  EXPECT_NE(writer.open_error().find(dir.path().string() + "/perf-10.map: "), std::string::npos)
      << writer.open_error();
  writer.add(0x1000, 0x10, "Lost.m()"); // counted, not written anywhere
  EXPECT_EQ(writer.lost_lines(), 1u);
  EXPECT_TRUE(std::filesystem::is_directory(dir.path() / "perf-10.map" / "inside"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
}

// Peak resident memory of this process so far, in KiB.
long peak_rss_kb()
{
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

TEST(PerfMapWriter, AHugeMapAtTheNameIsNeverReadOrGrown)
{
  TempDir dir;
  std::string path = dir.path().string() + "/perf-11.map";
  {
    std::ofstream(path) << "1000 40 Squatter.m()\n";
  }
  std::filesystem::resize_file(path, uint64_t{8} << 30); // sparse
  PerfMapWriter writer;
  ASSERT_TRUE(writer.open(dir.path().string(), 11)) << writer.open_error();
  writer.add(0x2000, 0x40, "Own.m()");
  ASSERT_LT(std::filesystem::file_size(path), 4096u);
  EXPECT_EQ(contents(path), "2000 40 Own.m()\n");
}

TEST(PerfMapWriter, RewriteReadsOnlyWhatTheAgentWroteInBoundedPieces)
{
  TempDir dir;
  PerfMapWriter writer;
  ASSERT_TRUE(writer.open(dir.path().string(), 12)) << writer.open_error();
  std::string name(100, 'z');
  for (uint64_t i = 0; i < 2000; ++i)
    writer.add(0x100000 + i * 0x100, 0x100, name + std::to_string(i));
  // The file grows behind the writer's back (a hole of 512 MiB after its lines).
  uint64_t written = writer.file_bytes();
  std::filesystem::resize_file(writer.path(), written + (uint64_t{512} << 20));
  long rss_before = peak_rss_kb();
  for (uint64_t i = 0; i < 2000; ++i) {
    if (i % 10 != 0)
      writer.remove(0x100000 + i * 0x100);
  }
  ASSERT_GE(writer.compactions(), 1u);
  EXPECT_LT(peak_rss_kb() - rss_before, 64 * 1024) << "the rewrite read what it had not written";
  // Only the writer's own lines, every live one of them, and nothing of the hole.
  std::string text = contents(writer.path());
  EXPECT_EQ(text.size(), writer.file_bytes());
  EXPECT_EQ(text.find('\0'), std::string::npos);
  for (uint64_t i = 0; i < 2000; i += 10)
    EXPECT_NE(text.find(name + std::to_string(i) + "\n"), std::string::npos) << i;
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
