#include <filesystem>
#include <gtest/gtest.h>

#include "dumps/dump_files.h"
#include "dumps/retention.h"
#include "test_support.h"

namespace flamebpf::dumps {
namespace {

using namespace std::chrono_literals;
using flamebpf::testing::TempDir;
using flamebpf::testing::write_file;

Clock::time_point at(int64_t seconds, int64_t millis = 0)
{
  return Clock::time_point(std::chrono::seconds(seconds) + std::chrono::milliseconds(millis));
}

// 2026-11-22T16:20:00Z
constexpr int64_t kT = 1795364400;

TEST(WindowName, SecondsOrMilliseconds)
{
  EXPECT_EQ(window_name({at(kT), at(kT + 60)}), "20261122T162000Z_20261122T162100Z");
  EXPECT_EQ(window_name({at(kT, 250), at(kT + 1)}), "20261122T162000.250Z_20261122T162001.000Z");
  EXPECT_EQ(parse_window_name("20261122T162000Z_20261122T162100Z.folded"),
            (Window{at(kT), at(kT + 60)}));
  EXPECT_EQ(parse_window_name("20261122T162000.250Z_20261122T162001.000Z.pb.gz"),
            (Window{at(kT, 250), at(kT + 1)}));
  EXPECT_FALSE(parse_window_name("latest.svg"));
  EXPECT_FALSE(parse_window_name("20261122T162100Z_20261122T162000Z.svg")); // ends before start
  EXPECT_FALSE(parse_window_name("20261399T162000Z_20261122T162100Z.svg"));
  // Every window name parses back to its window.
  for (int64_t millis : {0, 1, 999}) {
    Window window{at(kT, millis), at(kT + 3600, millis)};
    EXPECT_EQ(parse_window_name(window_name(window) + ".svg"), window);
  }
}

TEST(TargetDirectory, NeverLeavesTheOutputDirectory)
{
  EXPECT_EQ(target_directory("web"), "web");
  EXPECT_TRUE(
      target_directory("system.slice/nginx.service").starts_with("system.slice_nginx.service_"));
  EXPECT_TRUE(target_directory("..").starts_with("_.._"));
  EXPECT_TRUE(target_directory(".").starts_with("_._"));
  EXPECT_TRUE(target_directory("").starts_with("__"));
  EXPECT_TRUE(target_directory("a\nb;c").starts_with("a_b_c_"));
  EXPECT_EQ(target_directory("a\nb;c").find('/'), std::string::npos);
}

TEST(ListDumps, GroupsFilesByWindowOldestFirst)
{
  TempDir dir;
  auto root = dir.path();
  write_file(root / "20261122T162100Z_20261122T162200Z.folded", "xx");
  write_file(root / "20261122T162000Z_20261122T162100Z.svg", "svg!");
  write_file(root / "20261122T162000Z_20261122T162100Z.folded", "x");
  write_file(root / "20261122T162000Z_20261122T162100Z.folded.tmp.42", "partial");
  write_file(root / ".20261122T162000Z_20261122T162100Z.folded.tmp.0123456789abcdef", "partial");
  write_file(root / "notes.txt", "?");
  std::filesystem::create_symlink("20261122T162100Z_20261122T162200Z.folded",
                                  root / "latest.folded");
  auto dumps = list_dumps(root);
  ASSERT_EQ(dumps.size(), 2u);
  EXPECT_EQ(dumps[0].window, (Window{at(kT), at(kT + 60)}));
  EXPECT_EQ(dumps[0].files, (std::vector<std::string>{"20261122T162000Z_20261122T162100Z.folded",
                                                      "20261122T162000Z_20261122T162100Z.svg"}));
  EXPECT_EQ(dumps[0].bytes, 5u);
  EXPECT_EQ(dumps[1].bytes, 2u);
}

TEST(ParseTime, EveryAcceptedSpelling)
{
  Clock::time_point now = at(kT + 3600);
  EXPECT_EQ(parse_time("2026-11-22T16:20:00Z", now), at(kT));
  EXPECT_EQ(parse_time("2026-11-22 16:20:00", now), at(kT));
  EXPECT_EQ(parse_time("2026-11-22 16:20", now), at(kT));
  EXPECT_EQ(parse_time("20261122T162000Z", now), at(kT));
  EXPECT_EQ(parse_time("@1795364400", now), at(kT));
  EXPECT_EQ(parse_time("-30m", now), at(kT + 1800));
  EXPECT_EQ(parse_time("-1h", now), at(kT));
  EXPECT_FALSE(parse_time("yesterday", now));
  EXPECT_FALSE(parse_time("2026-13-01 00:00", now));
  EXPECT_FALSE(parse_time("-5x", now));
  // Times no clock holds are refused, not wrapped around.
  EXPECT_EQ(parse_time("@4102444800", now), at(4102444800));
  for (const char* huge : {"@9223372036854775807", "@-9223372036854775807", "@4102444801",
                           "-9223372036854775807d", "-106751991167301d", "-4102444801s"})
    EXPECT_FALSE(parse_time(huge, now)) << huge;
}

TEST(ParseDurationAndSize, Units)
{
  EXPECT_EQ(parse_duration("90s"), 90s);
  EXPECT_EQ(parse_duration("30m"), 1800s);
  EXPECT_EQ(parse_duration("7d"), 604800s);
  EXPECT_EQ(parse_duration("15"), 15s);
  EXPECT_FALSE(parse_duration("m"));
  EXPECT_FALSE(parse_duration("-5m"));
  EXPECT_EQ(parse_size("500M"), 500ull << 20);
  EXPECT_EQ(parse_size("2g"), 2ull << 30);
  EXPECT_EQ(parse_size("4096"), 4096u);
  EXPECT_FALSE(parse_size("lots"));
}

std::vector<Dump> hourly_dumps(int count, uint64_t bytes)
{
  std::vector<Dump> dumps;
  for (int i = 0; i < count; ++i)
    dumps.push_back(
        {{at(kT + i * 3600), at(kT + (i + 1) * 3600)}, {"f" + std::to_string(i)}, bytes});
  return dumps;
}

TEST(Retention, OldestFirstUntilEveryLimitHolds)
{
  auto dumps = hourly_dumps(10, 100);
  Clock::time_point now = at(kT + 10 * 3600);
  EXPECT_TRUE(expired_dumps(dumps, {}, now).empty());
  RetentionPolicy by_count;
  by_count.max_count = 7;
  auto expired = expired_dumps(dumps, by_count, now);
  ASSERT_EQ(expired.size(), 3u);
  EXPECT_EQ(expired[0].files[0], "f0");
  EXPECT_EQ(expired[2].files[0], "f2");
  RetentionPolicy by_age;
  by_age.max_age = std::chrono::seconds(4 * 3600 + 1); // windows ending over 4 h ago
  EXPECT_EQ(expired_dumps(dumps, by_age, now).size(), 5u);
  RetentionPolicy by_size;
  by_size.max_bytes = 450;
  EXPECT_EQ(expired_dumps(dumps, by_size, now).size(), 6u);
  RetentionPolicy all;
  all.max_count = 9;
  all.max_bytes = 750;
  EXPECT_EQ(expired_dumps(dumps, all, now).size(), 3u);
}

TEST(Retention, TheNewestIsAlwaysKept)
{
  RetentionPolicy strict;
  strict.max_age = 0s;
  strict.max_bytes = 1;
  auto expired = expired_dumps(hourly_dumps(3, 100), strict, at(kT + 99 * 3600));
  ASSERT_EQ(expired.size(), 2u);
  EXPECT_EQ(expired[1].files[0], "f1");
  EXPECT_TRUE(expired_dumps(hourly_dumps(1, 100), strict, at(kT + 99 * 3600)).empty());
}

} // namespace
} // namespace flamebpf::dumps
