#include <filesystem>
#include <fstream>
#include <future>
#include <gtest/gtest.h>
#include <string>

#include "dumps/metrics.h"
#include "serve/profile_routes.h"
#include "temp_dir.h"

namespace flamebpf::serve {
namespace {

namespace fs = std::filesystem;

void write_file(const fs::path& path, const std::string& text)
{
  std::ofstream(path) << text;
}

// An agent's output directory: the target "web" with two windows of folded dumps (and an SVG of
// the first), a symbolic link to it, and the stats file.
// A drain of one stack: comm, then frame, count times, in target.
profile::SymbolizedProfile
one_stack(const char* comm, const char* target, const char* frame, uint64_t count)
{
  profile::Stack stack;
  stack.comm = comm;
  stack.target = target;
  stack.frames = {{frame, "", profile::FrameKind::kNative}};
  stack.count = count;
  profile::SymbolizedProfile part;
  part.stacks = {stack};
  return part;
}

class ProfileRoutesTest : public ::testing::Test {
protected:
  void SetUp() override
  {
    fs::create_directory(dir_.path() / "web");
    write_file(dir_.path() / "web" / "20261122T162000Z_20261122T162100Z.folded",
               "java;main;heavy 30\njava;main;light 10\n");
    write_file(dir_.path() / "web" / "20261122T162000Z_20261122T162100Z.svg", "<svg/>");
    write_file(dir_.path() / "web" / "20261122T162100Z_20261122T162200Z.folded",
               "java;main;heavy 3\n");
    fs::create_directory_symlink(dir_.path() / "web", dir_.path() / "linked");
    write_file(dir_.path() / "flamebpf-stats.jsonl", "{}\n");
    options_.output_dir = dir_.path();
  }

  // The answer, as the server gives it: one made in its turn (a range, a diff) is waited for.
  HttpResponse get(const std::string& path, std::map<std::string, std::string> query = {})
  {
    bool live = query.contains("seconds") || path == "/debug/pprof/profile";
    ProfileRoutes routes(options_, metrics_, live_);
    HttpResponse response = routes(HttpRequest{path, std::move(query)});
    if (!response.deferred || live)
      return response;
    std::promise<HttpResponse> given;
    auto answer = given.get_future();
    response.deferred(
        Reply([&given](std::function<HttpResponse()> make) { given.set_value(make()); }));
    if (answer.wait_for(std::chrono::seconds(30)) != std::future_status::ready)
      return plain_text(0, "no answer in 30 s");
    return answer.get();
  }

  testing::TempDir dir_;
  ProfileRoutesOptions options_;
  std::shared_ptr<dumps::Metrics> metrics_ = std::make_shared<dumps::Metrics>();
  std::shared_ptr<LiveProfiles> live_ = std::make_shared<LiveProfiles>();
};

TEST_F(ProfileRoutesTest, TargetsAreTheDirectoriesWithDumps)
{
  auto answer = get("/targets");
  EXPECT_EQ(answer.status, 200);
  EXPECT_EQ(answer.content_type, "application/json");
  EXPECT_EQ(answer.body, "[{\"name\":\"web\",\"dumps\":2,\"from\":\"2026-11-22T16:20:00Z\","
                         "\"to\":\"2026-11-22T16:22:00Z\"}]\n");
}

TEST_F(ProfileRoutesTest, ARangeIsTheSumOfItsWindowsAndNoneIsTheLastWindow)
{
  auto last = get("/folded/web");
  EXPECT_EQ(last.status, 200) << last.body;
  EXPECT_EQ(last.body, "java;main;heavy 3\n");
  auto both = get("/folded/web", {{"from", "2026-11-22T16:20:00Z"}, {"to", "20261122T162200Z"}});
  EXPECT_EQ(both.status, 200) << both.body;
  EXPECT_EQ(both.content_type, "text/plain; charset=utf-8");
  EXPECT_EQ(both.body, "java;main;heavy 33\njava;main;light 10\n");
  auto first = get("/folded/web", {{"to", "2026-11-22T16:21:00Z"}});
  EXPECT_EQ(first.body, "java;main;heavy 30\njava;main;light 10\n");
  // Whole windows only, as flamebpf merge sums them.
  EXPECT_EQ(get("/folded/web", {{"from", "2026-11-22T16:20:30Z"}}).body, "java;main;heavy 3\n");
  EXPECT_EQ(get("/folded/web", {{"from", "2026-11-23T00:00:00Z"}}).status, 404);
}

TEST_F(ProfileRoutesTest, PprofAndSvgAreServedAsScrapersAndBrowsersExpect)
{
  auto pprof = get("/pprof/web", {{"from", "@0"}});
  ASSERT_EQ(pprof.status, 200) << pprof.body;
  EXPECT_EQ(pprof.content_type, "application/octet-stream");
  EXPECT_EQ(pprof.headers["Content-Disposition"], "attachment; filename=\"profile\"");
  ASSERT_GE(pprof.body.size(), 2u);
  EXPECT_EQ(pprof.body.substr(0, 2), "\x1f\x8b"); // gzip, as Go's endpoint sends it
  auto svg = get("/svg/web");
  ASSERT_EQ(svg.status, 200) << svg.body;
  EXPECT_EQ(svg.content_type, "image/svg+xml; charset=utf-8");
  EXPECT_NE(svg.body.find("<svg"), std::string::npos);
  EXPECT_NE(svg.body.find("heavy"), std::string::npos);
}

TEST_F(ProfileRoutesTest, NamesAreLookedUpNeverUsedAsPaths)
{
  for (const char* path : {"/folded/../../etc/passwd", "/folded/..", "/folded/.", "/folded/",
                           "/folded/linked", "/folded/web/../web", "/folded/flamebpf-stats.jsonl",
                           "/folded/web/", "/pprof//etc/passwd", "/svg/%2e%2e", "/nothing"}) {
    auto answer = get(path);
    EXPECT_EQ(answer.status, 404) << path;
    EXPECT_EQ(answer.body.find("root:"), std::string::npos) << path;
  }
}

TEST_F(ProfileRoutesTest, BadRangesAndTooLargeAnswersAreRefused)
{
  EXPECT_EQ(get("/folded/web", {{"from", "yesterday"}}).status, 400);
  EXPECT_EQ(get("/folded/web", {{"from", "-1h"}, {"to", "-2h"}}).status, 400);
  options_.max_input_bytes = 10;
  auto large = get("/folded/web", {{"from", "@0"}});
  EXPECT_EQ(large.status, 400) << large.body;
  EXPECT_NE(large.body.find("shorter range"), std::string::npos) << large.body;
  // What a merge reads is counted, the folded files: the flame graph beside the first is not.
  options_.max_input_bytes = 38 + 18;
  EXPECT_EQ(get("/folded/web", {{"from", "@0"}}).status, 200);
  options_.max_input_bytes = 38 + 18 - 1;
  EXPECT_EQ(get("/folded/web", {{"from", "@0"}}).status, 400);
  options_.max_input_bytes = 1 << 20;
  // The stacks summed are counted as they are held: a few hundred bytes for three stacks.
  options_.max_held_bytes = 100;
  auto held = get("/folded/web", {{"from", "@0"}});
  EXPECT_EQ(held.status, 400) << held.body;
  EXPECT_NE(held.body.find("distinct stacks"), std::string::npos) << held.body;
  options_.max_held_bytes = 1 << 20;
  options_.max_response_bytes = 10;
  EXPECT_EQ(get("/folded/web", {{"from", "@0"}}).status, 400);
}

TEST_F(ProfileRoutesTest, GosDefaultPathIsEveryTargetsNextThirtySecondsOrThoseAskedFor)
{
  for (const char* seconds : {"", "2"}) {
    std::map<std::string, std::string> query;
    if (*seconds)
      query["seconds"] = seconds;
    HttpResponse deferred = get("/debug/pprof/profile", query);
    ASSERT_TRUE(deferred.deferred) << deferred.body;
    std::optional<HttpResponse> answer;
    deferred.deferred(Reply([&](std::function<HttpResponse()> make) { answer = make(); }));
    auto part = one_stack("web", "web", "work", 3);
    auto now = LiveProfiles::Clock::now();
    live_->drained(part, now);
    int length = *seconds ? 2 : 30;
    live_->drained(part, now + std::chrono::seconds(length - 1));
    EXPECT_FALSE(answer) << seconds;
    live_->drained(part, now + std::chrono::seconds(length));
    ASSERT_TRUE(answer) << seconds;
    EXPECT_EQ(answer->status, 200);
    EXPECT_EQ(answer->content_type, "application/octet-stream");
  }
  EXPECT_EQ(get("/debug/pprof/profile", {{"seconds", "0"}}).status, 400);
}

TEST_F(ProfileRoutesTest, MetricsAreTheLastIntervalsText)
{
  auto empty = get("/metrics");
  EXPECT_EQ(empty.status, 200);
  EXPECT_EQ(empty.content_type, "text/plain; version=0.0.4; charset=utf-8");
  profile::SymbolizedProfile interval;
  profile::Stack stack;
  stack.target = "web";
  stack.count = 7;
  interval.stacks.push_back(stack);
  dumps::IntervalStats stats;
  stats.profile = &interval;
  metrics_->add(stats);
  EXPECT_NE(get("/metrics").body.find("flamebpf_samples_total{target=\"web\"} 7\n"),
            std::string::npos);
}

TEST_F(ProfileRoutesTest, SecondsIsAProfileOfTheNextSecondsOfATargetBeingRecorded)
{
  for (const char* bad : {"0", "-1", "abc", "3.5", "601", ""})
    EXPECT_EQ(get("/pprof/web", {{"seconds", bad}}).status, 400) << bad;
  EXPECT_EQ(get("/pprof/web", {{"seconds", "3"}, {"from", "-1h"}}).status, 400);
  EXPECT_EQ(get("/folded/db", {{"seconds", "1"}}).status, 404); // no dumps, not recorded
  EXPECT_EQ(ProfileRoutes(options_, metrics_)(HttpRequest{"/pprof/web", {{"seconds", "1"}}}).status,
            400); // not recording

  live_->target_added("db"); // recorded, with no dump yet
  HttpResponse deferred = get("/folded/db", {{"seconds", "1"}});
  ASSERT_TRUE(deferred.deferred);
  std::optional<HttpResponse> answer;
  deferred.deferred(Reply([&](std::function<HttpResponse()> make) { answer = make(); }));
  EXPECT_EQ(live_->waiting(), 1u);
  auto part = one_stack("postgres", "db", "exec_query", 7);
  auto now = LiveProfiles::Clock::now();
  live_->drained(part, now);
  live_->drained(part, now + std::chrono::milliseconds(500));
  EXPECT_FALSE(answer);
  live_->drained(part, now + std::chrono::seconds(1));
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 200);
  EXPECT_EQ(answer->body, "postgres;exec_query 14\n");
}

TEST_F(ProfileRoutesTest, SecondsWithoutATargetIsEveryTarget)
{
  EXPECT_EQ(get("/pprof").status, 400); // the dumps are summed per target only
  HttpResponse deferred = get("/folded", {{"seconds", "1"}});
  ASSERT_TRUE(deferred.deferred);
  std::optional<HttpResponse> answer;
  deferred.deferred(Reply([&](std::function<HttpResponse()> make) { answer = make(); }));
  profile::SymbolizedProfile part;
  for (const char* target : {"web", "db"}) {
    profile::Stack stack;
    stack.comm = target;
    stack.target = target;
    stack.frames = {{"work", "", profile::FrameKind::kNative}};
    stack.count = 3;
    part.stacks.push_back(stack);
  }
  auto now = LiveProfiles::Clock::now();
  live_->drained(part, now);
  live_->drained(part, now + std::chrono::seconds(1));
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->body, "db;work 3\nweb;work 3\n");
}

TEST_F(ProfileRoutesTest, TooManyLiveProfilesAreRefusedWithRetryAfter)
{
  for (size_t i = 0; i < LiveProfiles::kMaxWaiting; ++i)
    ASSERT_TRUE(live_->wait("web", std::chrono::seconds(1), [](profile::SymbolizedProfile) {}));
  HttpResponse deferred = get("/pprof/web", {{"seconds", "1"}});
  ASSERT_TRUE(deferred.deferred);
  std::optional<HttpResponse> answer;
  deferred.deferred(Reply([&](std::function<HttpResponse()> make) { answer = make(); }));
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 503);
  EXPECT_EQ(answer->headers["Retry-After"], "10");
}

} // namespace
} // namespace flamebpf::serve
