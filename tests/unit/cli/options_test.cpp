#include <gtest/gtest.h>
#include <string>
#include <vector>

#include "cli/options.h"

namespace flamebpf::cli {
namespace {

// The Config the command line args parses into; throws CLI::ParseError as main sees it.
Config parse(std::vector<std::string> args)
{
  Config config;
  CLI::App app;
  add_options(app, config);
  args.insert(args.begin(), "flamebpf");
  std::vector<const char*> argv;
  for (const auto& arg : args)
    argv.push_back(arg.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  finish_parse(app, config);
  return config;
}

TEST(Options, DumpFormatsAndRetentionArriveParsed)
{
  Config config = parse({"--output-dir", "/d", "--format", "pprof,folded,pprof", "--retain-age",
                         "7d", "--retain-count", "3", "--retain-size", "2G"});
  EXPECT_EQ(config.formats,
            (std::vector<emit::Format>{emit::Format::kPprof, emit::Format::kFolded}));
  EXPECT_EQ(config.retention.max_age, std::chrono::seconds(7 * 24 * 3600));
  EXPECT_EQ(config.retention.max_count, 3u);
  EXPECT_EQ(config.retention.max_bytes, 2ull << 30);
  EXPECT_EQ(config.interval_seconds, 60);
}

TEST(Options, DefaultsLeaveRetentionUnboundedAndDumpFoldedAndSvg)
{
  Config config = parse({"--output-dir", "/d"});
  EXPECT_EQ(config.formats, (std::vector<emit::Format>{emit::Format::kFolded, emit::Format::kSvg}));
  EXPECT_FALSE(config.retention.max_age);
  EXPECT_FALSE(config.retention.max_count);
  EXPECT_FALSE(config.retention.max_bytes);
  EXPECT_EQ(parse({}).interval_seconds, 2);
}

TEST(Options, MalformedValuesAreUsageErrors)
{
  EXPECT_THROW(parse({"--output-dir", "/d", "--format", "folded,gif"}), CLI::ParseError);
  EXPECT_THROW(parse({"--output-dir", "/d", "--retain-age", "7 days"}), CLI::ParseError);
  EXPECT_THROW(parse({"--output-dir", "/d", "--retain-size", "2 gigabytes"}), CLI::ParseError);
  EXPECT_THROW(parse({"merge", "/d/web", "--from", "yesterday", "-o", "x.svg"}), CLI::ParseError);
}

TEST(Options, EachCommandHasItsDefaultTitleUnlessOneIsGiven)
{
  EXPECT_EQ(parse({}).graph.title, emit::kDefaultTitle);
  EXPECT_EQ(parse({"render", "a.folded", "-o", "a.svg"}).graph.title, emit::kDefaultTitle);
  EXPECT_EQ(parse({"diff", "a", "b", "-o", "d.svg"}).graph.title, emit::kDifferentialTitle);
  Config titled = parse({"diff", "a", "b", "-o", "d.svg", "--title", "Before & after", "--width",
                         "900", "--inverted"});
  EXPECT_EQ(titled.graph.title, "Before & after");
  EXPECT_EQ(titled.graph.width, 900u);
  EXPECT_TRUE(titled.graph.inverted);
  EXPECT_EQ(parse({"--title", ""}).graph.title, emit::kDefaultTitle);
}

TEST(Options, MergeRangeArrivesAsTimes)
{
  Config config = parse(
      {"merge", "/d/web", "--from", "@1795000000", "--to", "2026-11-22T16:20:00Z", "-o", "x.svg"});
  EXPECT_EQ(config.mode, Mode::kMerge);
  ASSERT_TRUE(config.merge_from);
  EXPECT_EQ(config.merge_from->time_since_epoch(), std::chrono::seconds(1795000000));
  ASSERT_TRUE(config.merge_to);
  EXPECT_EQ(config.merge_to->time_since_epoch(), std::chrono::seconds(1795364400));
  EXPECT_FALSE(parse({"merge", "/d/web", "-o", "x.svg"}).merge_from);
}

} // namespace
} // namespace flamebpf::cli
