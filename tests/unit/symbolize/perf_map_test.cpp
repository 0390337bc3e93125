#include <charconv>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <memory>
#include <sys/stat.h>
#include <unistd.h>

#include "common/unique_fd.h"
#include "symbolize/name_cut.h"
#include "symbolize/perf_map.h"
#include "test_support.h"

namespace flamebpf::symbolize {
namespace {

using flamebpf::testing::read_data;
using flamebpf::testing::TempDir;
using flamebpf::testing::write_file;

// A /proc/<pid>/status for a process whose real, effective, saved and filesystem uid are uid.
void write_status(const std::string& proc, uint32_t pid, uint32_t uid)
{
  std::string id = std::to_string(uid);
  write_file(proc + "/" + std::to_string(pid) + "/status",
             "Name:\tjava\nUid:\t" + id + "\t" + id + "\t" + id + "\t" + id + "\nNSpid:\t" +
                 std::to_string(pid) + "\t1\n");
}

// A fixture read as flamebpf reads maps, by a process of the user who owns the file.
std::unique_ptr<PerfMapReader> load(const std::string& fixture, uint64_t* bad = nullptr)
{
  TempDir dir;
  std::string proc = dir.path().string();
  write_file(proc + "/7/root/tmp/perf-1.map", read_data("perfmap/" + fixture));
  write_status(proc, 7, ::geteuid());
  auto reader = std::make_unique<PerfMapReader>(7, 1, proc);
  reader->refresh();
  if (bad)
    *bad = reader->bad_lines();
  return reader;
}

// The entry covering address, its name read from the map as a frame's would be.
std::optional<PerfMapTable::Entry> named(PerfMapReader& reader, uint64_t address)
{
  reader.read_name(address);
  return reader.table().find(address);
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

TEST(PerfMapTable, HoldsWhatItsShareAllowsAndGivesItBack)
{
  auto account = MemoryAccount::create(16 << 20);
  auto share = account->share("jit");
  PerfMapTable table;
  table.charge_to(share);
  // Each name costs its text and kNameBytes, each range kRangeBytes: the rest is held as
  // kTruncated while ranges still fit (an insert asks for two while it places one), then refused.
  // A name of a size that leaves room for such ranges once names no longer fit:
  std::string name(1000, 'n');
  auto each_insert = [&] {
    return name.size() + PerfMapTable::kNameBytes + PerfMapTable::kRangeBytes;
  };
  while ((16u << 20) % each_insert() < 4 * PerfMapTable::kRangeBytes)
    name.push_back('n');
  size_t fitted = 0;
  for (uint64_t i = 0; i < 20000; ++i)
    fitted += table.insert({0x1000 + i * 0x10, 0x1010 + i * 0x10, name, false});
  size_t each = each_insert();
  EXPECT_NEAR(static_cast<double>(fitted), static_cast<double>((16u << 20) / each), 2.0);
  EXPECT_GT(table.share_refusals(), 0u);
  EXPECT_LE(share->held(), uint64_t{16} << 20);
  // The entries after the last that fitted: kTruncated, as long as their ranges fit.
  std::optional<PerfMapTable::Entry> after;
  for (uint64_t i = fitted; i < 20000 && !after; ++i)
    after = table.find(0x1000 + i * 0x10);
  ASSERT_TRUE(after);
  EXPECT_TRUE(after->truncated);
  table.clear();
  EXPECT_EQ(share->held(), 0u);
  // Ranges replaced give back their names and nodes.
  for (uint64_t i = 0; i < 10; ++i)
    EXPECT_TRUE(table.insert({0x1000 + i * 0x10, 0x1010 + i * 0x10, name, false}));
  EXPECT_EQ(share->held(), 10 * each);
  EXPECT_TRUE(table.insert({0x1000, 0x10a0, name, false}));
  EXPECT_EQ(share->held(), each);
  EXPECT_EQ(account->breakdown().of(MemoryKind::kPerfMaps), each);
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

TEST(PerfMapLine, LongNameIsCutToItsBudget)
{
  std::string name(kMaxPerfMapName + 100, 'x');
  auto entry = parse_perf_map_line("1000 10 " + name);
  ASSERT_TRUE(entry.has_value());
  EXPECT_TRUE(entry->truncated);
  EXPECT_EQ(entry->name.size(), kMaxPerfMapName);
  EXPECT_EQ(entry->name, name.substr(0, kMaxPerfMapName - kTruncated.size()) + "[truncated]");
  auto fits = parse_perf_map_line("1000 10 " + std::string(kMaxPerfMapName, 'x'));
  ASSERT_TRUE(fits.has_value());
  EXPECT_FALSE(fits->truncated);
  EXPECT_EQ(fits->name.size(), kMaxPerfMapName);
}

TEST(PerfMapLine, LongInlineChainLosesWholeMethods)
{
  // As a recursive method inlined into itself thousands of times would be named.
  std::string chain = "R.r()";
  while (chain.size() < 60000)
    chain += "->R.r()";
  auto entry = parse_perf_map_line("1000 10 " + chain);
  ASSERT_TRUE(entry.has_value());
  EXPECT_TRUE(entry->truncated);
  EXPECT_LE(entry->name.size(), kMaxPerfMapName);
  EXPECT_GT(entry->name.size(), kMaxPerfMapName - 20);
  EXPECT_TRUE(entry->name.ends_with("R.r()->[truncated]")) << entry->name.substr(16000);
}

TEST(PerfMapLine, CutNeverSplitsACharacter)
{
  // Two-byte characters: the budget less kTruncated is odd, so the cut falls inside one unless it
  // steps back.
  std::string name;
  while (name.size() < kMaxPerfMapName + 10)
    name += "\u00e9";
  auto entry = parse_perf_map_line("1000 10 " + name);
  ASSERT_TRUE(entry.has_value());
  std::string kept = entry->name.substr(0, entry->name.size() - kTruncated.size());
  EXPECT_EQ(kept.size() % 2, 0u);
  EXPECT_EQ(static_cast<unsigned char>(kept.back()), 0xa9u);
}

TEST(PerfMapFixtures, Jdk17AndJdk25CompilerPerfmap)
{
  for (const char* fixture : {"jdk17-compiler-perfmap.map", "jdk25-compiler-perfmap.map"}) {
    uint64_t bad = 0;
    auto reader = load(fixture, &bad);
    EXPECT_EQ(bad, 0u) << fixture;
    EXPECT_GE(reader->table().size(), 40u) << fixture;
  }
  auto reader = load("jdk17-compiler-perfmap.map");
  auto work = named(*reader, 0x00007fe79ceca920 + 0x10);
  ASSERT_TRUE(work.has_value());
  EXPECT_EQ(work->name, "long Hot.work(long)");
  EXPECT_FALSE(work->truncated);
  auto interpreter = named(*reader, 0x00007fe79c940b80 + 0x100);
  ASSERT_TRUE(interpreter.has_value());
  EXPECT_EQ(interpreter->name, "Interpreter");
}

TEST(PerfMapFixtures, FlamebpfAgent)
{
  uint64_t bad = 0;
  auto reader = load("flamebpf-agent-jdk17.map", &bad);
  EXPECT_EQ(bad, 0u);
  auto work = named(*reader, 0x7faa19403040);
  ASSERT_TRUE(work.has_value());
  EXPECT_EQ(work->name, "Hot.work(long)");
}

TEST(PerfMapFixtures, PerfMapAgentAndBadLinesCounted)
{
  uint64_t bad = 0;
  auto reader = load("perf-map-agent.map", &bad);
  EXPECT_EQ(bad, 4u);
  EXPECT_EQ(reader->table().size(), 8u);
  ASSERT_TRUE(named(*reader, 0x7f3c2d012a10).has_value());
  EXPECT_EQ(named(*reader, 0x7f3c2d012a10)->name,
            "Lorg/example/Service;::handle->Lorg/example/Codec;::decode");
  uint64_t malformed_bad = 0;
  auto malformed = load("malformed.map", &malformed_bad);
  EXPECT_EQ(malformed->table().size(), 2u);
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
  EXPECT_FALSE(table.find(0x2000).has_value());
  table.insert({0x0800, 0x1500, "over the start"});
  EXPECT_EQ(table.find(0x1000)->name, "over the start");
  EXPECT_EQ(table.find(0x1500)->name, "inside");
  table.insert({0x0000, 0x3000, "everything"});
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(table.find(0x1fff)->name, "everything");
  EXPECT_FALSE(table.find(0x3000).has_value());
}

TEST(PerfMapTable, PiecesOfASplitRangeShareItsName)
{
  // One long name over a wide range, split by a thousand small ranges: its bytes are held once.
  PerfMapTable table;
  std::string wide(10000, 'w');
  table.insert({0, 0x100000, wide});
  for (uint64_t i = 1; i <= 1000; ++i)
    table.insert({i * 0x100, i * 0x100 + 0x10, "S.s()"});
  EXPECT_EQ(table.size(), 2001u);
  EXPECT_EQ(table.name_bytes(), wide.size() + 1000 * 5);
  EXPECT_EQ(table.find(0x150)->name, wide);
  EXPECT_EQ(table.find(0x200)->name, "S.s()");
  // Replacing every range frees every name.
  table.insert({0, 0x100000, "All.new()"});
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(table.name_bytes(), 9u);
}

TEST(PerfMapTable, NameBytesHaveABudget)
{
  PerfMapTable table(100);
  EXPECT_TRUE(table.insert({0x1000, 0x1010, std::string(40, 'a')}));
  EXPECT_TRUE(table.insert({0x2000, 0x2010, std::string(40, 'b')}));
  EXPECT_FALSE(table.insert({0x3000, 0x3010, std::string(40, 'c')}));
  EXPECT_LE(table.name_bytes(), 100u);
  auto cut = table.find(0x3000);
  ASSERT_TRUE(cut.has_value());
  EXPECT_EQ(cut->name, "[truncated]");
  EXPECT_TRUE(cut->truncated);
  EXPECT_FALSE(table.find(0x1000)->truncated);
  // Names freed by a later line make room again.
  table.insert({0x1000, 0x3000, "Over.both()"});
  EXPECT_TRUE(table.insert({0x4000, 0x4010, std::string(40, 'd')}));
  EXPECT_EQ(table.find(0x4000)->name, std::string(40, 'd'));
}

class PerfMapReaderTest : public ::testing::Test {
protected:
  // Process 7 runs as the user who writes the maps.
  void SetUp() override { write_status(proc(), 7, ::geteuid()); }
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
  EXPECT_FALSE(named(reader, 0x2000).has_value()); // the line is not finished yet
  append("()\n1000 10 A.recompiled()\n");
  reader.refresh();
  EXPECT_EQ(named(reader, 0x2000)->name, "B.b()");
  EXPECT_EQ(named(reader, 0x1000)->name, "A.recompiled()");
  EXPECT_EQ(reader.bad_lines(), 0u);
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

// "<hex start> 10 <name>\n" for count lines at consecutive addresses from first.
std::string lines(size_t count, uint64_t first, const std::string& name)
{
  std::string text;
  char start[32];
  for (size_t i = 0; i < count; ++i) {
    auto end = std::to_chars(start, start + sizeof start, first + i * 0x10, 16).ptr;
    text += std::string(start, end) + " 10 " + name + "\n";
  }
  return text;
}

TEST_F(PerfMapReaderTest, NamesBeyondTheMapsBudgetAreReadAsTruncated)
{
  // Distinct names of 16 KiB, more bytes of them than a map may hold.
  size_t count = PerfMapTable::kMaxNameBytes / kMaxPerfMapName + 100;
  std::string text;
  for (size_t i = 0; i < count; ++i) {
    std::string name = std::to_string(i);
    name.resize(kMaxPerfMapName, 'n');
    text += lines(1, 0x10000 + i * 0x10, name);
  }
  write_file(map_path(), text);
  PerfMapReader reader(7, 1, proc());
  for (int interval = 0; interval < 3; ++interval) {
    reader.refresh();
    reader.begin_interval();
  }
  EXPECT_EQ(reader.table().size(), count);
  for (size_t i = 0; i < count; ++i)
    reader.read_name(0x10000 + i * 0x10);
  EXPECT_LE(reader.table().name_bytes(), PerfMapTable::kMaxNameBytes + kTruncated.size());
  EXPECT_GE(reader.names_over_budget(), 100u);
  EXPECT_EQ(reader.long_names(), 0u);
  auto first = named(reader, 0x10000);
  ASSERT_TRUE(first.has_value());
  EXPECT_TRUE(first->name.starts_with("0nnn"));
  auto last = named(reader, 0x10000 + (count - 1) * 0x10);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->name, "[truncated]");
  EXPECT_TRUE(last->truncated);
}

// A map names every piece of code a JIT made, and samples hold few of them: a name is read from
// its line when a frame needs it, and believed only if the line there still names that code.
TEST_F(PerfMapReaderTest, ANameIsReadWhenAFrameNeedsItIfItsLineStillNamesIt)
{
  auto account = MemoryAccount::create(16 << 20);
  auto share = account->share("jit");
  std::string text = lines(100, 0x10000, "Some.method(long)") + "20000 100 Outer.run()\n";
  write_file(map_path(), text);
  PerfMapReader reader(7, 1, proc(), share);
  reader.refresh();
  EXPECT_EQ(reader.table().size(), 101u);
  EXPECT_EQ(reader.table().name_bytes(), 0u);
  EXPECT_EQ(share->held(), 101 * PerfMapTable::kRangeBytes);
  auto unread = reader.table().find(0x10010);
  ASSERT_TRUE(unread.has_value());
  EXPECT_TRUE(unread->line.has_value());
  EXPECT_EQ(unread->name, "");
  EXPECT_EQ(named(reader, 0x10010)->name, "Some.method(long)");
  EXPECT_EQ(reader.table().name_bytes(), std::string_view("Some.method(long)").size());
  // A later line splits Outer.run(): both pieces are named by its line.
  append("20040 10 Inner.inlined()\n");
  reader.refresh();
  EXPECT_EQ(named(reader, 0x20000)->name, "Outer.run()");
  EXPECT_EQ(named(reader, 0x200ff)->name, "Outer.run()");
  EXPECT_EQ(named(reader, 0x20040)->name, "Inner.inlined()");
  // The process rewrites a line in place, as long as before: it names other code now, and the
  // code it named before stays unnamed.
  size_t at = text.find("10020 10 Some.method(long)");
  ASSERT_NE(at, std::string::npos);
  {
    std::fstream in_place(map_path(), std::ios::in | std::ios::out);
    in_place.seekp(static_cast<std::streamoff>(at));
    in_place << "30020";
  }
  EXPECT_FALSE(named(reader, 0x10020).has_value());
  EXPECT_EQ(named(reader, 0x10030)->name, "Some.method(long)");
}

TEST_F(PerfMapReaderTest, LongNamesAreCutAndCounted)
{
  write_file(map_path(), "1000 10 " + std::string(kMaxPerfMapName * 2, 'x') + "\n2000 10 B.b()\n");
  PerfMapReader reader(7, 1, proc());
  reader.refresh();
  EXPECT_EQ(reader.long_names(), 1u);
  EXPECT_EQ(reader.bad_lines(), 0u);
  EXPECT_EQ(named(reader, 0x1000)->name.size(), kMaxPerfMapName);
  EXPECT_TRUE(named(reader, 0x1000)->truncated);
  EXPECT_EQ(named(reader, 0x2000)->name, "B.b()");
}

TEST_F(PerfMapReaderTest, AnIntervalReadsAtMostItsBudgetHoweverOftenItRefreshes)
{
  // More lines than an interval may parse (fewer names than a map may hold), then a last line.
  std::string name(140, 'n');
  size_t count = PerfMapReader::kMaxParsePerInterval / name.size() + 1000;
  write_file(map_path(), lines(count, 0x100000, name) + "2000 10 Last.line()\n");
  PerfMapReader reader(7, 1, proc());
  for (int poll = 0; poll < 10; ++poll)
    reader.refresh();
  EXPECT_EQ(reader.file().intervals_over_budget(), 1u);
  EXPECT_FALSE(named(reader, 0x2000).has_value());
  EXPECT_LT(reader.table().size(), count);
  EXPECT_GT(reader.table().size(), count / 2);
  reader.begin_interval();
  reader.refresh();
  ASSERT_TRUE(named(reader, 0x2000).has_value());
  EXPECT_EQ(named(reader, 0x2000)->name, "Last.line()");
  EXPECT_EQ(reader.file().intervals_over_budget(), 1u);
}

} // namespace
} // namespace flamebpf::symbolize
