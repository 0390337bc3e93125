#include <csignal>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <set>
#include <sstream>
#include <stdexcept>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/utf8.h"
#include "dumps/dump_writer.h"
#include "dumps/stats.h"
#include "test_support.h"
#include "test_xml.h"

namespace flamebpf::dumps {
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

DumpWriter open_writer(const DumpOptions& options)
{
  auto writer = DumpWriter::open(options);
  if (!writer)
    throw std::runtime_error(writer.error().message);
  return std::move(*writer);
}

std::set<std::string> names_in(const std::filesystem::path& dir)
{
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    names.insert(entry.path().filename());
  return names;
}

mode_t mode_of(const std::filesystem::path& path)
{
  struct stat status {};
  EXPECT_EQ(::lstat(path.c_str(), &status), 0) << path;
  return status.st_mode & 07777;
}

// Limits the size of files this process writes for a test's scope (writes past it fail with
// EFBIG, as they would with ENOSPC on a full disk), and ignores SIGXFSZ meanwhile.
class FileSizeLimit {
public:
  explicit FileSizeLimit(rlim_t bytes)
  {
    ::getrlimit(RLIMIT_FSIZE, &previous_);
    previous_handler_ = ::signal(SIGXFSZ, SIG_IGN);
    rlimit limit{bytes, previous_.rlim_max};
    ::setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit()
  {
    ::setrlimit(RLIMIT_FSIZE, &previous_);
    ::signal(SIGXFSZ, previous_handler_);
  }

private:
  rlimit previous_{};
  sighandler_t previous_handler_ = SIG_DFL;
};

TEST(DumpWriter, OneSetOfFilesPerTargetAndLatestLinks)
{
  TempDir dir;
  DumpOptions options;
  options.directory = dir.path().string();
  DumpWriter writer = open_writer(options);
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
  DumpWriter writer = open_writer(options);
  for (int i = 0; i < 4; ++i)
    writer.write(interval(static_cast<uint64_t>(5 + i), 1), window(i));
  auto dumps = list_dumps(dir.path() / "web");
  ASSERT_EQ(dumps.size(), 2u);
  EXPECT_EQ(dumps[0].window, window(2));
  EXPECT_EQ(dumps[1].files, (std::vector<std::string>{"20261122T162300Z_20261122T162400Z.diff.svg",
                                                      "20261122T162300Z_20261122T162400Z.folded"}));
  std::string diff = contents(dir.path() / "web" / "latest.diff.svg");
  EXPECT_EQ(flamebpf::testing::xml_problems(diff), "");
  EXPECT_NE(diff.find("data-b=\"7\" data-a=\"8\" data-n=\"main\""), std::string::npos);
}

TEST(DumpWriter, KeepsIntervalsWhileWritesFailAndRetries)
{
  TempDir dir;
  DumpOptions options;
  options.directory = dir.path().string();
  options.formats = {emit::Format::kFolded};
  options.max_pending = 2;
  DumpWriter writer = open_writer(options);
  {
    // Every write fails for want of room, as on a full disk.
    FileSizeLimit full(0);
    auto failed = writer.write(interval(5, 0), window(0));
    EXPECT_NE(failed.error.find("File too large"), std::string::npos) << failed.error;
    EXPECT_EQ(failed.pending, 1u);
    writer.write(interval(6, 0), window(1));
    auto dropped = writer.write(interval(7, 0), window(2));
    EXPECT_EQ(dropped.dropped, 1u); // the oldest of three gives way
  }
  auto recovered = writer.write(interval(8, 0), window(3));
  EXPECT_EQ(recovered.error, "");
  EXPECT_EQ(recovered.pending, 0u);
  EXPECT_EQ(recovered.files, 3u);
  auto dumps = list_dumps(dir.path() / "web");
  ASSERT_EQ(dumps.size(), 3u);
  EXPECT_EQ(dumps[0].window, window(1));
}

TEST(DumpWriter, RemovesOnlyItsOwnTemporariesOfAKilledRun)
{
  TempDir dir;
  TempDir elsewhere;
  std::filesystem::create_directories(dir.path() / "web");
  std::ofstream(dir.path() / "web" / ".20261122T162000Z_20261122T162100Z.svg.tmp.0123456789abcdef")
      << "<svg";
  std::ofstream(dir.path() / "web" / "20261122T162000Z_20261122T162100Z.svg.tmp.999") << "<svg";
  std::ofstream(dir.path() / "web" / "notes.tmp.txt") << "the operator's";
  // A link to another directory, holding a file named like a temporary: left alone.
  std::ofstream(elsewhere.path() / ".x.tmp.0123456789abcdef") << "not flamebpf's";
  std::filesystem::create_directory_symlink(elsewhere.path(), dir.path() / "db");
  DumpOptions options;
  options.directory = dir.path().string();
  DumpWriter writer = open_writer(options);
  EXPECT_EQ(names_in(dir.path() / "web"), std::set<std::string>{"notes.tmp.txt"});
  EXPECT_EQ(names_in(elsewhere.path()), std::set<std::string>{".x.tmp.0123456789abcdef"});
}

TEST(DumpWriter, TargetsThatDifferInReplacedCharactersGetDirectoriesOfTheirOwn)
{
  TempDir dir;
  DumpOptions options;
  options.directory = dir.path().string();
  options.formats = {emit::Format::kFolded};
  DumpWriter writer = open_writer(options);
  profile::SymbolizedProfile profile;
  profile.stacks = {{10, "one", "a/b", {{"main", "", FrameKind::kNative}}, 5},
                    {20, "two", "a_b", {{"main", "", FrameKind::kNative}}, 7},
                    {30, "three", "a b", {{"main", "", FrameKind::kNative}}, 9}};
  EXPECT_EQ(writer.write(profile, window(0)).files, 3u);
  auto names = names_in(dir.path());
  EXPECT_EQ(names.size(), 3u) << ::testing::PrintToString(names);
  EXPECT_EQ(contents(dir.path() / "a_b" / "latest.folded"), "two;main 7\n");
  EXPECT_EQ(contents(dir.path() / target_directory("a/b") / "latest.folded"), "one;main 5\n");
  EXPECT_EQ(contents(dir.path() / target_directory("a b") / "latest.folded"), "three;main 9\n");
  // The next interval, with only one of them, writes to the same directory.
  profile.stacks.erase(profile.stacks.begin() + 1, profile.stacks.end());
  writer.write(profile, window(1));
  EXPECT_EQ(list_dumps(dir.path() / target_directory("a/b")).size(), 2u);
  EXPECT_EQ(list_dumps(dir.path() / "a_b").size(), 1u);
}

TEST(DumpWriter, FilesAre0640AndDirectories0750)
{
  mode_t previous = ::umask(022);
  TempDir dir;
  DumpOptions options;
  options.directory = (dir.path() / "dumps").string();
  DumpWriter writer = open_writer(options);
  writer.write(interval(5, 0), window(0));
  ASSERT_TRUE(writer.append_stats("{}").has_value());
  ::umask(previous);
  EXPECT_EQ(mode_of(dir.path() / "dumps"), 0750u);
  EXPECT_EQ(mode_of(dir.path() / "dumps" / "web"), 0750u);
  EXPECT_EQ(mode_of(dir.path() / "dumps" / kStatsFileName), 0640u);
  for (const auto& file : names_in(dir.path() / "dumps" / "web")) {
    if (!file.starts_with("latest.")) {
      EXPECT_EQ(mode_of(dir.path() / "dumps" / "web" / file), 0640u) << file;
    }
  }
}

TEST(DumpWriter, RefusesAnOutputDirectoryOthersMayWrite)
{
  TempDir dir;
  std::filesystem::create_directory(dir.path() / "shared");
  ::chmod((dir.path() / "shared").c_str(), 01777);
  DumpOptions options;
  options.directory = (dir.path() / "shared").string();
  auto writer = DumpWriter::open(options);
  ASSERT_FALSE(writer.has_value());
  EXPECT_TRUE(writer.error().message.starts_with("--output-dir " + options.directory +
                                                 " is writable by others"))
      << writer.error().message;
  std::filesystem::create_directory_symlink(dir.path(), dir.path() / "link");
  options.directory = (dir.path() / "link").string();
  writer = DumpWriter::open(options);
  ASSERT_FALSE(writer.has_value());
  EXPECT_NE(writer.error().message.find("is a symbolic link"), std::string::npos)
      << writer.error().message;
}

TEST(DumpWriter, ATargetDirectoryReplacedByALinkIsRefusedAndTheOthersWritten)
{
  TempDir dir;
  TempDir victim;
  const std::string victim_dump = "20261122T162000Z_20261122T162100Z.folded";
  std::ofstream(victim.path() / victim_dump) << "precious\n";
  DumpOptions options;
  options.directory = dir.path().string();
  options.formats = {emit::Format::kFolded};
  options.retention.max_count = 1;
  DumpWriter writer = open_writer(options);
  writer.write(interval(5, 3), window(0));
  // Between intervals, web's directory becomes a link to another directory.
  std::filesystem::remove_all(dir.path() / "web");
  std::filesystem::create_directory_symlink(victim.path(), dir.path() / "web");
  for (int i = 1; i <= 3; ++i) {
    auto report = writer.write(interval(5, 3), window(i));
    EXPECT_EQ(report.refused, 1u);
    EXPECT_EQ(report.error, "");
    EXPECT_EQ(report.pending, 0u) << "a refused target must not hold the others back";
  }
  EXPECT_EQ(names_in(victim.path()), std::set<std::string>{victim_dump});
  EXPECT_EQ(contents(victim.path() / victim_dump), "precious\n");
  auto db = list_dumps(dir.path() / "db");
  ASSERT_EQ(db.size(), 1u); // retention ran there
  EXPECT_EQ(db[0].window, window(3));
  // Once the link is gone, web is written again.
  std::filesystem::remove(dir.path() / "web");
  auto report = writer.write(interval(5, 3), window(4));
  EXPECT_EQ(report.refused, 0u);
  EXPECT_EQ(list_dumps(dir.path() / "web").size(), 1u);
}

TEST(DumpWriter, AFifoAtTheStatsFileIsRefusedWithoutBlocking)
{
  TempDir dir;
  DumpOptions options;
  options.directory = dir.path().string();
  DumpWriter writer = open_writer(options);
  ASSERT_EQ(::mkfifo((dir.path() / kStatsFileName).c_str(), 0600), 0);
  auto appended = writer.append_stats("{}");
  ASSERT_FALSE(appended.has_value());
  EXPECT_NE(appended.error().message.find("it is a FIFO"), std::string::npos)
      << appended.error().message;
}

TEST(Stats, OneJsonLinePerInterval)
{
  auto profile = interval(5, 3);
  profile.counters.counts[FB_COUNTER_KSTACK_COLLISION] = 2;
  profile.symbolize_stats = {100, 4, 50, 1, 6, 2, 9};
  IntervalStats stats;
  stats.window = window(0);
  stats.profile = &profile;
  stats.perf_maps = {{42, "web\"quoted", 1.5}};
  stats.usage = {1.25, 30 << 20, 12 << 20, 17};
  stats.occupancy = {120, 3, 0, 118, 40, 5 << 20, 12};
  stats.interval_cpu_seconds = 0.05;
  std::string json = stats_json(stats);
  EXPECT_EQ(json.find('\n'), std::string::npos);
  EXPECT_NE(json.find("\"start\":\"2026-11-22T16:20:00.000Z\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"web\":{\"samples\":5,\"processes\":1}"), std::string::npos) << json;
  profile.target_labels["web"] = {"web", "abc", "prod", "shop"};
  json = stats_json(stats);
  EXPECT_NE(json.find("\"web\":{\"samples\":5,\"processes\":1,\"container\":\"web\","
                      "\"container_id\":\"abc\",\"namespace\":\"prod\",\"pod\":\"shop\"}"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"total\":2,\"kernel_stack_collisions\":2"), std::string::npos) << json;
  EXPECT_NE(json.find("\"native_share\":0.0400"), std::string::npos) << json;
  EXPECT_NE(json.find("\"native_inlined_frames\":9"), std::string::npos) << json;
  EXPECT_NE(json.find("\"jit_share\":0.0200"), std::string::npos) << json;
  EXPECT_NE(json.find("\"truncated\":{\"names\":6,\"stacks\":2}"), std::string::npos) << json;
  EXPECT_NE(json.find("{\"pid\":42,\"target\":\"web\\\"quoted\",\"age_seconds\":1.5}"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"rss_bytes\":31457280,\"rss_anon_bytes\":12582912,\"open_fds\":17"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"occupancy\":{\"known_images\":120,\"cgroup_targets\":3,"
                      "\"pid_targets\":0,\"processes\":118,\"elf_files\":40,"
                      "\"symbol_bytes\":5242880,\"symbol_tables\":12}"),
            std::string::npos)
      << json;
  EXPECT_EQ(summary_line(stats), "interval 16:20:00\xE2\x80\x93"
                                 "16:21:00: 8 samples in 2 targets, 2 drops, unnamed "
                                 "frames: native 4.0%, JIT 2.0%; flamebpf CPU 0.05 s, RSS 30 MB, "
                                 "memory 0.0 MiB");
  // Kinds under 0.05 MiB read 0.0 and are left out of the line (the JSON has them all).
  stats.memory.bytes[static_cast<size_t>(MemoryKind::kSymbols)] = 3 << 19;
  stats.memory.bytes[static_cast<size_t>(MemoryKind::kPerfMaps)] = 1 << 19;
  stats.memory.bytes[static_cast<size_t>(MemoryKind::kDumps)] = 1000;
  EXPECT_TRUE(summary_line(stats).ends_with("memory 2.0 MiB (symbols 1.5, perf_maps 0.5)"))
      << summary_line(stats);
}

std::vector<profile::TargetCoverage> coverage_of_web_and_db()
{
  profile::SymbolizedProfile profile;
  profile.frequency_hz = 100;
  profile.stacks = {{10, "nginx", "web", {{"main", "", FrameKind::kNative}}, 97},
                    {20, "postgres", "db", {{"db+0x10", "", FrameKind::kUnknown}}, 50}};
  return profile::measure_coverage(profile, {{"web", 1.0}, {"db", 0.5}});
}

TEST(Stats, EachTargetsCoverageInTheJsonAndTheLine)
{
  auto profile = interval(97, 50);
  IntervalStats stats;
  stats.window = window(0);
  stats.profile = &profile;
  stats.coverage = coverage_of_web_and_db();
  std::string json = stats_json(stats);
  EXPECT_NE(
      json.find("\"coverage\":{\"db\":{\"cpu_seconds\":0.500,\"expected_samples\":50.0,"
                "\"samples\":50,\"whole_samples\":0,\"coverage\":0.0000,\"judged\":true,"
                "\"shortfall\":{\"drops\":0.0,\"unwinding\":0.0,\"naming\":50.0,"
                "\"sampling_rate\":0.0},\"reason\":\"naming\"},\"web\":{\"cpu_seconds\":1.000,"),
      std::string::npos)
      << json;
  EXPECT_NE(json.find("\"coverage\":0.9700,\"judged\":true"), std::string::npos) << json;
  EXPECT_NE(summary_line(stats).find("; coverage db 0% (naming), web 97%; flamebpf CPU"),
            std::string::npos)
      << summary_line(stats);
}

TEST(DumpWriter, EachFlameGraphsSubtitleHasItsTargetsCoverage)
{
  TempDir dir;
  DumpOptions options;
  options.directory = dir.path().string();
  options.formats = {emit::Format::kSvg};
  DumpWriter writer = open_writer(options);
  writer.write(interval(97, 50), window(0), coverage_of_web_and_db());
  std::string web = contents(dir.path() / "web" / "latest.svg");
  EXPECT_NE(web.find("99 Hz \xC2\xB7 97 samples \xC2\xB7 coverage 97%</text>"), std::string::npos)
      << web.substr(0, 2000);
  std::string db = contents(dir.path() / "db" / "latest.svg");
  EXPECT_NE(db.find("\xC2\xB7 coverage 0% (naming)</text>"), std::string::npos)
      << db.substr(0, 2000);
}

TEST(Stats, JsonStringsAreValidUtf8)
{
  EXPECT_EQ(json_string("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
  // Valid UTF-8 is kept; each byte outside a valid sequence becomes U+FFFD; DEL is escaped.
  EXPECT_EQ(json_string("caf\xC3\xA9 \xE2\x82\xAC"), "\"caf\xC3\xA9 \xE2\x82\xAC\"");
  EXPECT_EQ(json_string("bad \xff\xfe\xc0\x80 \xed\xa0\x80 \xe2\x82 end\x7f"),
            "\"bad \\ufffd\\ufffd\\ufffd\\ufffd \\ufffd\\ufffd\\ufffd \\ufffd\\ufffd end"
            "\\u007f\"");
  auto profile = interval(5, 0);
  profile.stacks[0].target = "web\xff\x1b[31m";
  IntervalStats stats;
  stats.window = window(0);
  stats.profile = &profile;
  stats.perf_maps = {{10, "web\xff\x1b[31m", 1}};
  std::string json = stats_json(stats);
  EXPECT_TRUE(utf8::is_valid(json)) << json;
  EXPECT_EQ(json.find('\x1b'), std::string::npos) << json;
  EXPECT_NE(json.find("\"web\\ufffd\\u001b[31m\":{\"samples\":5"), std::string::npos) << json;
}

} // namespace
} // namespace flamebpf::dumps
