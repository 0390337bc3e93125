#include <gtest/gtest.h>
#include <regex>
#include <string>
#include <vector>

#include "top/top_table.h"

namespace flamebpf::top {
namespace {

using profile::Frame;
using profile::FrameKind;

profile::Stack stack(const std::string& target,
                     const std::vector<std::string>& frames,
                     uint64_t count,
                     FrameKind kind = FrameKind::kNative)
{
  profile::Stack out;
  out.comm = "app";
  out.target = target;
  out.count = count;
  for (const auto& name : frames)
    out.frames.push_back({name, "", kind});
  return out;
}

profile::SymbolizedProfile interval(std::vector<profile::Stack> stacks)
{
  profile::SymbolizedProfile profile;
  profile.end = std::chrono::system_clock::now();
  profile.start = profile.end - std::chrono::seconds(1);
  profile.frequency_hz = 100;
  profile.stacks = std::move(stacks);
  return profile;
}

TopModel model_of(const std::vector<profile::SymbolizedProfile>& intervals)
{
  TopModel model;
  for (const auto& profile : intervals)
    model.add(compact_interval(profile, model.names()));
  return model;
}

double total_of(const TopModel& model, const std::vector<TopRow>& rows, const std::string& name)
{
  for (const auto& row : rows)
    if (model.names()[row.function].text == name)
      return row.total;
  return -1;
}

TEST(TopTable, SelfGoesToTheLeafAndTotalOnceToEachFunctionOfTheStack)
{
  auto model = model_of(
      {interval({stack("web", {"main", "heavy", "work", "work"}, 30),
                 stack("web", {"main", "light", "work"}, 10), stack("", {"main", "idle"}, 60)})});
  auto rows = model.rows(TopWindow::kInterval, TopOrder::kSelf, "", std::nullopt);
  ASSERT_GE(rows.size(), 2u);
  EXPECT_EQ(model.names()[rows[0].function].text, "idle");
  EXPECT_DOUBLE_EQ(rows[0].self_share, 0.6);
  EXPECT_EQ(model.names()[rows[1].function].text, "work");
  EXPECT_DOUBLE_EQ(rows[1].self, 40);
  EXPECT_DOUBLE_EQ(rows[1].total, 40); // recursion counts once per stack
  EXPECT_DOUBLE_EQ(total_of(model, rows, "main"), 100);

  // One target: its own samples are the whole.
  auto web = model.rows(TopWindow::kInterval, TopOrder::kTotal, "web", std::nullopt);
  // main and work are in every stack: work, with self samples too, comes first.
  EXPECT_EQ(model.names()[web[0].function].text, "work");
  EXPECT_EQ(model.names()[web[1].function].text, "main");
  EXPECT_DOUBLE_EQ(web[1].total_share, 1);
  EXPECT_DOUBLE_EQ(total_of(model, web, "heavy") / 40, 0.75);
  EXPECT_DOUBLE_EQ(total_of(model, web, "idle"), -1);

  auto filtered = model.rows(TopWindow::kInterval, TopOrder::kSelf, "", std::regex("^l"));
  ASSERT_EQ(filtered.size(), 1u);
  EXPECT_EQ(model.names()[filtered[0].function].text, "light");
}

TEST(TopTable, WindowsAreTheLastIntervalADecayingAverageAndTheWholeRun)
{
  auto model = model_of(
      {interval({stack("", {"main", "old"}, 100)}), interval({stack("", {"main", "new"}, 100)})});
  auto last = model.rows(TopWindow::kInterval, TopOrder::kSelf, "", std::nullopt);
  EXPECT_DOUBLE_EQ(total_of(model, last, "old"), -1);
  auto all = model.rows(TopWindow::kSinceStart, TopOrder::kSelf, "", std::nullopt);
  EXPECT_DOUBLE_EQ(total_of(model, all, "old"), 100);
  EXPECT_DOUBLE_EQ(total_of(model, all, "new"), 100);
  auto decaying = model.rows(TopWindow::kDecaying, TopOrder::kSelf, "", std::nullopt);
  double old_total = total_of(model, decaying, "old");
  double new_total = total_of(model, decaying, "new");
  EXPECT_GT(new_total, old_total);
  EXPECT_GT(old_total, 0);
}

TEST(TopTable, TreeShowsCallersAndCalleesWithTheirShares)
{
  auto model = model_of({interval({stack("", {"main", "heavy", "sort", "copy"}, 30),
                                   stack("", {"main", "light", "sort", "compare"}, 10)})});
  uint32_t sort = model.names().intern("sort", FrameKind::kNative);
  auto tree = model.tree(sort, TopWindow::kInterval, "", 100);
  ASSERT_EQ(tree.callers.size(), 5u); // sort; heavy; main; light; main
  EXPECT_EQ(model.names()[tree.callers[1].function].text, "heavy");
  EXPECT_DOUBLE_EQ(tree.callers[1].share, 0.75);
  EXPECT_EQ(tree.callers[2].depth, 2);
  EXPECT_EQ(model.names()[tree.callers[3].function].text, "light");
  EXPECT_DOUBLE_EQ(tree.callers[3].share, 0.25);
  ASSERT_EQ(tree.callees.size(), 3u);
  EXPECT_EQ(model.names()[tree.callees[1].function].text, "copy");
}

TEST(TopTable, StoppedTargetsAreKeptAndSavedProfilesHoldTheWindow)
{
  auto model = model_of({interval({stack("web", {"main"}, 5)})});
  model.target_stopped("web");
  auto targets = model.targets();
  ASSERT_EQ(targets.size(), 1u);
  EXPECT_TRUE(targets[0].stopped);
  EXPECT_DOUBLE_EQ(targets[0].cpu_percent, 5);
  model.add(compact_interval(interval({stack("web", {"main"}, 7)}), model.names()));
  EXPECT_FALSE(model.targets()[0].stopped);
  auto saved = model.profile(TopWindow::kSinceStart, "");
  ASSERT_EQ(saved.stacks.size(), 1u);
  EXPECT_EQ(saved.stacks[0].count, 12u);
  EXPECT_EQ(saved.stacks[0].target, "web");
  EXPECT_EQ(saved.stacks[0].comm, "app");
}

TEST(TopTable, ManyNamesAndTargetsKeepTheirNumbersAndSumsOverIntervals)
{
  // Enough names and stacks that the tables grow many times, targets in a different order each
  // interval, and the same name under two kinds: two functions.
  TopModel model;
  std::vector<uint32_t> first_ids;
  for (int round = 0; round < 3; ++round) {
    std::vector<profile::Stack> stacks;
    for (int i = 0; i < 5000; ++i) {
      std::string target = (i + round) % 2 == 0 ? "even" : "odd";
      stacks.push_back(stack(target, {"main", "f" + std::to_string(i), "leaf"}, 1));
    }
    stacks.push_back(stack("odd", {"leaf"}, 7, FrameKind::kJit));
    model.add(compact_interval(interval(std::move(stacks)), model.names()));
    std::vector<uint32_t> ids;
    for (int i = 0; i < 5000; i += 499)
      ids.push_back(model.names().intern("f" + std::to_string(i), FrameKind::kNative));
    if (round == 0)
      first_ids = ids;
    EXPECT_EQ(ids, first_ids);
  }
  // main, leaf, 5,000 f's, the JIT leaf, and app (each stack's process name).
  EXPECT_EQ(model.names().size(), 5004u);
  auto all = model.rows(TopWindow::kSinceStart, TopOrder::kSelf, "", std::nullopt);
  ASSERT_EQ(all.size(), 5003u);
  EXPECT_EQ(model.names()[all[0].function].text, "leaf");
  EXPECT_EQ(model.names()[all[0].function].kind, FrameKind::kNative);
  EXPECT_DOUBLE_EQ(all[0].self, 15000);
  EXPECT_EQ(model.names()[all[1].function].kind, FrameKind::kJit);
  EXPECT_DOUBLE_EQ(all[1].self, 21);
  EXPECT_DOUBLE_EQ(total_of(model, all, "main"), 15000);
  EXPECT_DOUBLE_EQ(total_of(model, all, "f1234"), 3);
  // Each target's rows hold its own samples only: f1234 went to "even", "odd", "even".
  auto odd = model.rows(TopWindow::kSinceStart, TopOrder::kSelf, "odd", std::nullopt);
  auto even = model.rows(TopWindow::kSinceStart, TopOrder::kSelf, "even", std::nullopt);
  EXPECT_DOUBLE_EQ(total_of(model, odd, "f1234"), 1);
  EXPECT_DOUBLE_EQ(total_of(model, even, "f1234"), 2);
  EXPECT_DOUBLE_EQ(total_of(model, odd, "main") + total_of(model, even, "main"), 15000);
  EXPECT_DOUBLE_EQ(model.samples(TopWindow::kSinceStart, "odd") +
                       model.samples(TopWindow::kSinceStart, "even"),
                   15021);
  // The stacks since the start: each distinct one once, with all its samples.
  auto saved = model.profile(TopWindow::kSinceStart, "");
  EXPECT_EQ(saved.stacks.size(), 10001u);
  EXPECT_EQ(saved.total_samples(), 15021u);
}

TEST(TopTable, TerminalSafeNamesCarryNoControlsAndFitTheirColumns)
{
  EXPECT_EQ(terminal_safe("plain", 10, false), "plain");
  EXPECT_EQ(terminal_safe("\x1b]0;title\x07", 20, false), "?]0;title?");
  EXPECT_EQ(terminal_safe("a\xff\xfe"
                          "b",
                          10, false),
            "a??b");
  EXPECT_EQ(terminal_safe("caf\xc3\xa9", 10, false), "caf\xc3\xa9");
  EXPECT_EQ(terminal_safe("caf\xc3\xa9", 10, true), "caf?");
  // C1 controls (U+0080 to U+009F) act on some terminals too.
  EXPECT_EQ(terminal_safe("x\xc2\x9b"
                          "2J",
                          10, false),
            "x?2J");
  EXPECT_EQ(terminal_safe(std::string(5000, 'L'), 8, false), "LLLLLLL\xE2\x80\xA6");
  EXPECT_EQ(terminal_safe(std::string(5000, 'L'), 8, true), "LLLLLLL~");
  EXPECT_EQ(terminal_safe("12345678", 8, true), "12345678");
  EXPECT_EQ(terminal_safe("anything", 0, true), "");
}

TEST(TopTable, BatchSnapshotIsAHeaderTargetsAndRows)
{
  auto model = model_of({interval({stack("web", {"main", "work\x1b[2J"}, 3)})});
  std::string text = batch_snapshot(model, TopWindow::kInterval, TopOrder::kSelf, 10);
  EXPECT_NE(text.find("flamebpf top - "), std::string::npos) << text;
  EXPECT_NE(text.find("\nTARGET SAMPLES/S CPU% STATE\nweb 3 3.0 running\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("100.0 100.0 3 native work?[2J\n"), std::string::npos) << text;
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
}

TEST(TopTable, BatchHeaderEndsWithTheCoverageItsTargetsNamesMadeSafe)
{
  TopModel model;
  auto last = compact_interval(interval({stack("web", {"main"}, 3)}), model.names());
  last.coverage = "coverage web\x1b[2J 62% (naming)";
  model.add(std::move(last));
  std::string text = batch_snapshot(model, TopWindow::kInterval, TopOrder::kSelf, 10);
  EXPECT_NE(text.find(" drops, coverage web?[2J 62% (naming)\n"), std::string::npos) << text;
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
}

} // namespace
} // namespace flamebpf::top
