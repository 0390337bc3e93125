#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <unistd.h>

#include "agent/dump_writer.h"
#include "agent/stats.h"
#include "test_support.h"
#include "test_xml.h"

namespace flamebpf::agent {
namespace {

using namespace std::chrono_literals;
using flamebpf::testing::TempDir;
using profile::FrameKind;

constexpr int64_t kT = 1795364400; // 2026-11-22T16:20:00Z

std::string contents(const std::filesystem::path& path)
{
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

profile::SymbolizedProfile interval(uint64_t web, uint64_t db)
{
  profile::SymbolizedProfile profile;
  profile.frequency_hz = 99;
  profile.stacks = {{10, "nginx", "web", {{"main", "", FrameKind::kNative}}, web},
                    {20, "postgres", "db", {{"exec", "", FrameKind::kNative}}, db}};
  if (db == 0)
    profile.stacks.pop_back();
  return profile;
}

Window window(int index)
{
  return {Clock::time_point(std::chrono::seconds(kT + index * 60)),
          Clock::time_point(std::chrono::seconds(kT + (index + 1) * 60))};
}

TEST(DumpWriter, OneSetOfFilesPerTargetAndLatestLinks)
{
  TempDir dir;
  DumpOptions options;
  options.directory = dir.path().string();
  DumpWriter writer(options);
  auto report = writer.write(interval(5, 3), window(0));
  EXPECT_EQ(report.targets, 2u);
  EXPECT_EQ(report.files, 4u);
  EXPECT_EQ(report.error, "");
  auto web = dir.path() / "web";
  EXPECT_EQ(contents(web / "20261122T162000Z_20261122T162100Z.folded"), "nginx;main 5\n");
  EXPECT_EQ(
      flamebpf::testing::xml_problems(contents(web / "20261122T162000Z_20261122T162100Z.svg")), "");
  EXPECT_EQ(contents(dir.path() / "db" / "latest.folded"), "postgres;exec 3\n");
  // An interval where db had no samples writes nothing for it; latest follows the newest.
  writer.write(interval(7, 0), window(1));
  EXPECT_EQ(std::filesystem::read_symlink(web / "latest.folded"),
            "20261122T162100Z_20261122T162200Z.folded");
  EXPECT_EQ(contents(web / "latest.folded"), "nginx;main 7\n");
  EXPECT_EQ(list_dumps(dir.path() / "db").size(), 1u);
  EXPECT_EQ(list_dumps(web).size(), 2u);
}

TEST(DumpWriter, RetentionAndDiffAgainstThePreviousInterval)
{
  TempDir dir;
  DumpOptions options;
  options.directory = dir.path().string();
  options.formats = {emit::Format::kFolded};
  options.retention.max_count = 2;
  options.diff_previous = true;
  DumpWriter writer(options);
  for (int i = 0; i < 4; ++i)
    writer.write(interval(static_cast<uint64_t>(5 + i), 1), window(i));
  auto dumps = list_dumps(dir.path() / "web");
  ASSERT_EQ(dumps.size(), 2u);
  EXPECT_EQ(dumps[0].window, window(2));
  EXPECT_EQ(dumps[1].files, (std::vector<std::string>{"20261122T162300Z_20261122T162400Z.diff.svg",
                                                      "20261122T162300Z_20261122T162400Z.folded"}));
  std::string diff = contents(dir.path() / "web" / "latest.diff.svg");
  EXPECT_EQ(flamebpf::testing::xml_problems(diff), "");
  EXPECT_NE(diff.find("main (before 7, after 8, +1, +14.3%)"), std::string::npos);
}

TEST(DumpWriter, KeepsIntervalsWhileWritesFailAndRetries)
{
  TempDir dir;
  DumpOptions options;
  options.directory = dir.path().string();
  options.formats = {emit::Format::kFolded};
  options.max_pending = 2;
  DumpWriter writer(options);
  // A file where the target's directory should be: every write fails, as on a full disk.
  std::ofstream(dir.path() / "web") << "in the way";
  auto failed = writer.write(interval(5, 0), window(0));
  EXPECT_NE(failed.error.find("cannot create"), std::string::npos) << failed.error;
  EXPECT_EQ(failed.pending, 1u);
  writer.write(interval(6, 0), window(1));
  auto dropped = writer.write(interval(7, 0), window(2));
  EXPECT_EQ(dropped.dropped, 1u); // the oldest of three gives way
  std::filesystem::remove(dir.path() / "web");
  auto recovered = writer.write(interval(8, 0), window(3));
  EXPECT_EQ(recovered.error, "");
  EXPECT_EQ(recovered.pending, 0u);
  EXPECT_EQ(recovered.files, 3u);
  auto dumps = list_dumps(dir.path() / "web");
  ASSERT_EQ(dumps.size(), 3u);
  EXPECT_EQ(dumps[0].window, window(1));
}

TEST(DumpWriter, RemovesTemporariesOfAKilledRun)
{
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "web");
  std::ofstream(dir.path() / "web" / "20261122T162000Z_20261122T162100Z.svg.tmp.999") << "<svg";
  DumpOptions options;
  options.directory = dir.path().string();
  DumpWriter writer(options);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path() / "web"));
}

TEST(Stats, OneJsonLinePerInterval)
{
  auto profile = interval(5, 3);
  profile.counters.counts[FB_COUNTER_KSTACK_COLLISION] = 2;
  profile.symbolize_stats = {100, 4, 50, 1, 6, 2};
  IntervalStats stats;
  stats.window = window(0);
  stats.profile = &profile;
  stats.perf_maps = {{42, "web\"quoted", 1.5}};
  stats.usage = {1.25, 30 << 20, 12 << 20, 17};
  stats.occupancy = {120, 3, 0, 118, 40};
  stats.interval_cpu_seconds = 0.05;
  std::string json = stats_json(stats);
  EXPECT_EQ(json.find('\n'), std::string::npos);
  EXPECT_NE(json.find("\"start\":\"2026-11-22T16:20:00.000Z\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"web\":{\"samples\":5,\"processes\":1}"), std::string::npos) << json;
  EXPECT_NE(json.find("\"total\":2,\"kernel_stack_collisions\":2"), std::string::npos) << json;
  EXPECT_NE(json.find("\"native_share\":0.0400"), std::string::npos) << json;
  EXPECT_NE(json.find("\"jit_share\":0.0200"), std::string::npos) << json;
  EXPECT_NE(json.find("\"truncated\":{\"names\":6,\"stacks\":2}"), std::string::npos) << json;
  EXPECT_NE(json.find("{\"pid\":42,\"target\":\"web\\\"quoted\",\"age_seconds\":1.5}"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"rss_bytes\":31457280,\"rss_anon_bytes\":12582912,\"open_fds\":17"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"occupancy\":{\"known_images\":120,\"cgroup_targets\":3,"
                      "\"pid_targets\":0,\"processes\":118,\"elf_files\":40}"),
            std::string::npos)
      << json;
  EXPECT_EQ(summary_line(stats), "interval 16:20:00\xE2\x80\x93"
                                 "16:21:00: 8 samples in 2 targets, 2 drops, unnamed "
                                 "frames: native 4.0%, JIT 2.0%; flamebpf CPU 0.05 s, RSS 30 MB");
}

TEST(Stats, AppendsWholeLines)
{
  TempDir dir;
  std::string path = (dir.path() / "stats.jsonl").string();
  ASSERT_TRUE(append_line(path, "{\"a\":1}").has_value());
  ASSERT_TRUE(append_line(path, "{\"b\":2}").has_value());
  EXPECT_EQ(contents(path), "{\"a\":1}\n{\"b\":2}\n");
  EXPECT_EQ(json_string("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
}

} // namespace
} // namespace flamebpf::agent
