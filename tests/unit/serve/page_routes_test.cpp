#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "dumps/dump_files.h"
#include "serve/page_routes.h"
#include "serve/profile_routes.h"
#include "temp_dir.h"

namespace flamebpf::serve {
namespace {

namespace fs = std::filesystem;

void write_file(const fs::path& path, const std::string& text)
{
  std::ofstream(path, std::ios::binary) << text;
}

std::string read_file(const fs::path& path)
{
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// One stats line as flamebpf writes it, with the given "targets" object.
std::string stats_line(const std::string& start, const std::string& end, const std::string& targets)
{
  return "{\"start\":\"" + start + "\",\"end\":\"" + end + "\",\"samples\":1,\"node\":\"n\"," +
         "\"targets\":{" + targets + "},\"drops\":{}}\n";
}

const std::string kHostile = "a\"b</script><img src=x onerror=alert(1)>\\";
// kHostile as a JSON string's content.
const std::string kHostileJson = "a\\\"b</script><img src=x onerror=alert(1)>\\\\";

// An agent's output directory: the target "web" with two windows of folded dumps.
class PageRoutesTest : public ::testing::Test {
protected:
  void SetUp() override
  {
    fs::create_directory(dir_.path() / "web");
    write_file(dir_.path() / "web" / "20261122T162000Z_20261122T162100Z.folded",
               "java;main;heavy 30\njava;main;light 10\n");
    write_file(dir_.path() / "web" / "20261122T162100Z_20261122T162200Z.folded",
               "java;main;heavy 3\njava;main;fresh 7\n");
    fs::create_directory(dir_.path() / dumps::target_directory(kHostile));
    options_.output_dir = dir_.path();
  }

  std::optional<HttpResponse> get(const std::string& path,
                                  std::map<std::string, std::string> query = {},
                                  uint64_t max_stats_bytes = PageRoutes::kMaxStatsBytes)
  {
    return PageRoutes(options_, max_stats_bytes)(HttpRequest{path, std::move(query)});
  }

  testing::TempDir dir_;
  ProfileRoutesOptions options_;
};

TEST_F(PageRoutesTest, ThePageIsItsEmbeddedFilesUnderAPolicyThatAllowsOnlyThisOrigin)
{
  const fs::path sources = fs::path(FLAMEBPF_TEST_DATA) / "../../userspace/src/serve/page";
  auto page = get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->content_type, "text/html; charset=utf-8");
  EXPECT_EQ(page->body, read_file(sources / "index.html"));
  const std::string& policy = page->headers["Content-Security-Policy"];
  EXPECT_TRUE(policy.starts_with("default-src 'self';")) << policy;
  EXPECT_EQ(policy.find("unsafe"), std::string::npos) << policy;
  EXPECT_NE(policy.find("frame-ancestors 'none'"), std::string::npos) << policy;
  // No inline script: the policy would refuse it.
  EXPECT_EQ(page->body.find("<script>"), std::string::npos);

  auto script = get("/page.js");
  ASSERT_TRUE(script);
  EXPECT_EQ(script->content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(script->body, read_file(sources / "page.js"));
  EXPECT_EQ(script->body.find("innerHTML"), std::string::npos);
  auto style = get("/page.css");
  ASSERT_TRUE(style);
  EXPECT_EQ(style->content_type, "text/css; charset=utf-8");
  EXPECT_EQ(style->body, read_file(sources / "page.css"));
}

TEST_F(PageRoutesTest, OtherPathsAreLeftToTheOtherRoutes)
{
  for (const char* path : {"/nothing", "/svg/web", "/metrics", "/page.js/x", "/timeline/",
                           "/index.html", "/diff", "//"})
    EXPECT_FALSE(get(path)) << path;
}

TEST_F(PageRoutesTest, TheTimelineIsSamplesPerTargetPerWindowWithNamesAsData)
{
  std::string stats =
      stats_line("2026-11-22T16:20:00.000Z", "2026-11-22T16:21:00.000Z",
                 "\"web\":{\"samples\":40,\"processes\":1},\"" + kHostileJson +
                     "\":{\"samples\":5,\"processes\":1}") +
      // Bytes that are no UTF-8, as they would be if the file were forged: no line of flamebpf's.
      stats_line("2026-11-22T16:20:30.000Z", "2026-11-22T16:20:31.000Z",
                 "\"bad\xff\xfe\":{\"samples\":9}") +
      // What flamebpf writes for such a name.
      stats_line("2026-11-22T16:21:00.250Z", "2026-11-22T16:22:00.000Z",
                 "\"web\":{\"samples\":10},\"bad\\ufffd\":{\"samples\":2},"
                 "\"odd\":{\"samples\":-3},\"odder\":{\"samples\":\"7\"},\"oddest\":[]") +
      "{not json\n" + "\n" + "[1,2]\n" +
      stats_line("yesterday", "2026-11-22T16:21:00.000Z", "\"web\":{\"samples\":1}") +
      stats_line("2026-11-22T16:23:00.000Z", "2026-11-22T16:22:00.000Z",
                 "\"web\":{\"samples\":1}") +
      // A line far past any interval's, and one being written.
      "{\"targets\":{\"" + std::string(5 << 20, 'x') + "\":{\"samples\":1}}}\n" +
      stats_line("2026-11-22T16:22:00.000Z", "2026-11-22T16:23:00.000Z", "\"web\":{\"samples\":99}")
          .substr(0, 60);
  write_file(dir_.path() / "flamebpf-stats.jsonl", stats);

  auto answer = get("/timeline");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 200);
  EXPECT_EQ(answer->content_type, "application/json");
  auto timeline = nlohmann::json::parse(answer->body, nullptr, false);
  ASSERT_FALSE(timeline.is_discarded()) << answer->body;
  EXPECT_EQ(timeline["windows"],
            nlohmann::json::parse("[[1795364400000,1795364460000],[1795364460250,1795364520000]]"))
      << answer->body;
  EXPECT_EQ(timeline["skipped_lines"], 6) << answer->body;
  EXPECT_EQ(timeline["cut"], false);
  std::map<std::string, nlohmann::json> targets;
  for (const auto& target : timeline["targets"])
    targets[target["name"].get<std::string>()] = target;
  ASSERT_EQ(targets.size(), 3u) << answer->body;
  EXPECT_EQ(targets["web"]["directory"], "web");
  EXPECT_EQ(targets["web"]["samples"], nlohmann::json::parse("[[0,40],[1,10]]"));
  // The hostile name comes back as the same string, with the directory flamebpf made for it.
  ASSERT_TRUE(targets.contains(kHostile)) << answer->body;
  EXPECT_EQ(targets[kHostile]["directory"], dumps::target_directory(kHostile));
  EXPECT_EQ(targets[kHostile]["samples"], nlohmann::json::parse("[[0,5]]"));
  ASSERT_TRUE(targets.contains("bad\xEF\xBF\xBD")) << answer->body;
  EXPECT_TRUE(targets["bad\xEF\xBF\xBD"]["directory"].is_null());
}

TEST_F(PageRoutesTest, TheTimelineReadsOnlyTheLastBytesOfTheStats)
{
  std::string stats;
  for (int minute = 0; minute < 50; ++minute)
    stats += stats_line(fmt::format("2026-11-22T16:{:02}:00.000Z", minute),
                        fmt::format("2026-11-22T16:{:02}:00.000Z", minute + 1),
                        "\"web\":{\"samples\":" + std::to_string(minute) + "}");
  write_file(dir_.path() / "flamebpf-stats.jsonl", stats);
  size_t line = stats.size() / 50;
  // Three whole lines and part of a fourth.
  auto answer = get("/timeline", {}, 3 * line + line / 2);
  ASSERT_TRUE(answer);
  auto timeline = nlohmann::json::parse(answer->body, nullptr, false);
  ASSERT_FALSE(timeline.is_discarded()) << answer->body;
  EXPECT_EQ(timeline["cut"], true);
  EXPECT_EQ(timeline["skipped_lines"], 0);
  ASSERT_EQ(timeline["windows"].size(), 3u) << answer->body;
  EXPECT_EQ(timeline["targets"][0]["samples"], nlohmann::json::parse("[[0,47],[1,48],[2,49]]"));

  // No stats file yet: no windows.
  fs::remove(dir_.path() / "flamebpf-stats.jsonl");
  auto empty = get("/timeline");
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->status, 200);
  EXPECT_EQ(empty->body, "{\"windows\":[],\"targets\":[],\"skipped_lines\":0,\"cut\":false}\n");
  // Nor is a link followed to one.
  fs::create_symlink("/etc/passwd", dir_.path() / "flamebpf-stats.jsonl");
  EXPECT_EQ(get("/timeline")->body, empty->body);
}

TEST_F(PageRoutesTest, ADiffComparesTwoRangesOfOneTarget)
{
  auto diff = get("/diff/web", {{"base_from", "2026-11-22T16:20:00Z"},
                                {"base_to", "@1795364460"},
                                {"from", "2026-11-22T16:21:00Z"},
                                {"to", "2026-11-22T16:22:00Z"}});
  ASSERT_TRUE(diff);
  ASSERT_EQ(diff->status, 200) << diff->body;
  EXPECT_EQ(diff->content_type, "image/svg+xml; charset=utf-8");
  EXPECT_NE(diff->body.find("data-mode=\"diff\""), std::string::npos);
  EXPECT_NE(diff->body.find("Differential Flame Graph"), std::string::npos);
  // fresh is new in the range; the base is scaled to the range's 10 samples.
  EXPECT_NE(diff->body.find("data-n=\"fresh\""), std::string::npos);
  EXPECT_NE(diff->body.find("(40 samples) \xE2\x86\x92 2026-11-22 16:21:00\xE2\x80\x93"
                            "16:22:00 UTC (10 samples), normalized"),
            std::string::npos)
      << diff->body.substr(0, 4000);
}

TEST_F(PageRoutesTest, DiffNamesAreLookedUpAndBadRangesRefused)
{
  std::map<std::string, std::string> ranges{{"base_from", "@0"},
                                            {"base_to", "2026-11-22T16:21:00Z"},
                                            {"from", "2026-11-22T16:21:00Z"},
                                            {"to", "@1795364520"}};
  fs::create_directory_symlink(dir_.path() / "web", dir_.path() / "linked");
  for (const char* path : {"/diff/../web", "/diff/..", "/diff/", "/diff/linked", "/diff/web/",
                           "/diff/web/../web", "/diff/%2e%2e", "/diff/../../etc/passwd"}) {
    auto answer = get(path, ranges);
    ASSERT_TRUE(answer) << path;
    EXPECT_EQ(answer->status, 404) << path;
  }
  for (const char* missing : {"base_from", "base_to", "from", "to"}) {
    auto partial = ranges;
    partial.erase(missing);
    EXPECT_EQ(get("/diff/web", partial)->status, 400) << missing;
  }
  auto reversed = ranges;
  reversed["from"] = "@1795364520";
  reversed["to"] = "2026-11-22T16:21:00Z";
  EXPECT_EQ(get("/diff/web", reversed)->status, 400);
  auto malformed = ranges;
  malformed["base_to"] = "soon";
  auto refused = get("/diff/web", malformed);
  EXPECT_EQ(refused->status, 400);
  EXPECT_NE(refused->body.find("base_to="), std::string::npos) << refused->body;
  auto empty = ranges;
  empty["base_from"] = "2027-01-01T00:00:00Z";
  empty["base_to"] = "2027-01-02T00:00:00Z";
  EXPECT_EQ(get("/diff/web", empty)->status, 404);

  // Both ranges share one budget of dump bytes (each range's 40 bytes would fit in it alone), and
  // the answer has a bound of its own.
  options_.max_input_bytes = 60;
  auto large = get("/diff/web", ranges);
  EXPECT_EQ(large->status, 400) << large->body;
  EXPECT_NE(large->body.find("shorter range"), std::string::npos) << large->body;
  options_.max_input_bytes = 1 << 20;
  options_.max_response_bytes = 100;
  EXPECT_EQ(get("/diff/web", ranges)->status, 400);
}

} // namespace
} // namespace flamebpf::serve
