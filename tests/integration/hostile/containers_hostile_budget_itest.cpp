// flamebpf against containers whose perf maps cost far more than their size, or are not theirs:
// a 64 MiB sparse map of entries that a naive reader holds ten times over, one line whose inline
// chain of 9,300 methods would expand every stack to a million frames, a map replaced by another
// file every few milliseconds, and a map given to another user. Budgets per name, per map, per
// process and per interval (symbolize/perf_map.h, perf_map_names.h, symbolizer.h) keep flamebpf's
// memory, time and output bounded, mark each cut with "[truncated]" and say it once; a map that
// neither the process's user nor root owns is not read.
#include <gtest/gtest.h>
#include <unistd.h>

#include "hostile_harness.h"
#include "symbolize/perf_map_names.h"
#include "symbolize/symbolizer.h"

namespace flamebpf::testing {
namespace {

// The folded and SVG outputs of the 9,300-method chain: a few distinct stacks of at most
// kMaxStackFrames frames. Expanded whole they were 100 MB and more.
constexpr size_t kChainFoldedBound = 2 << 20;
constexpr size_t kChainSvgBound = 8 << 20;

// What flamebpf may read in 3 s of a map replaced every 3 ms: the map's budget of one interval
// (a read from the start, of PerfMapReader::kMaxParsePerInterval) for each of the run's two
// intervals, and what any run reads (/proc, kallsyms: ~10 MiB). Reading the map again at every
// poll, four times a second, read 300 MiB.
constexpr uint64_t kReplacedMapReadBound =
    2 * (symbolize::PerfMapReader::kMaxParsePerInterval + (1 << 20)) + (32 << 20);

// The processes of the container that holds more than its share of the memory account, and
// flamebpf's peak RSS bound then: its 64 MiB share, and what any run of the hostile tests takes.
constexpr int kShareAttackers = 8;
constexpr long kShareRssBoundKb = kRssBoundKb + (64 << 10);

// The most user frames in a stack of folded text: all but the process name and kernel frames.
size_t deepest(const std::map<std::string, uint64_t>& stacks)
{
  size_t deepest = 0;
  for (const auto& [stack, count] : stacks) {
    auto frames = split(stack, ';');
    deepest = std::max<size_t>(deepest, frames.size() - 1 - occurrences(stack, "_[k]"));
  }
  return deepest;
}

TEST_F(HostileContainerTest, HeavySparseMapOfManyEntriesKeepsMemoryBounded)
{
  // 64 MiB, mostly holes: a range with a 60 KiB name split by 8,192 small ranges (each piece
  // copying the name would take 480 MiB), then 4,000 distinct names of 16 KiB. It poses as a JVM,
  // so its map is polled four times a second.
  auto run = profile_heavy_map("hb-heavy", {"heavy", "JitSpinner.heavy"}, "JitSpinner.heavy", true);
  // The budgets that cut are said once each.
  EXPECT_EQ(lines_with(run.log, "names longer than 16 KiB are cut short").size(), 1u) << run.log;
  EXPECT_EQ(lines_with(run.log, "more to read than an interval allows").size(), 1u) << run.log;
}

TEST_F(HostileContainerTest, InlineChainOfThousandsOfMethodsIsCutVisibly)
{
  // One line names 120 functions that call each other, as recursion does, with a chain of 9,300
  // methods.
  spin("hb-inline", {"inline", "R.r()", "9300"});
  std::string out = dir_.path().string() + "/out";
  fs::create_directories(out);
  std::string folded_path = out + "/inline.folded";
  auto run = run_measured({"--cgroup", "hb-inline", "--no-attach", "-d", "3", "-o", folded_path},
                          dir_.path());
  print_figures("9,300-method inline chain", run);
  expect_prompt(run, 3);
  EXPECT_LT(run.max_rss_kb, kRssBoundKb) << describe(run);
  std::string folded = read_text(folded_path);
  std::printf("[ FIGURES  ] folded output: %zu bytes\n", folded.size());
  EXPECT_LT(folded.size(), kChainFoldedBound);
  EXPECT_EQ(folded_problems(folded), "");
  auto stacks = parse_folded(folded);
  uint64_t samples = total_count(stacks);
  EXPECT_GT(samples, 30u) << describe(run);
  // Each function's chain keeps its first methods, then shows the cut before the next function;
  // the stack keeps its innermost frames under one more mark.
  std::string cut_chain = "R.r_[i];[truncated];R.r_[j];R.r_[i]";
  EXPECT_GT(count_containing(stacks, cut_chain) * 2, samples) << folded.substr(0, 2000);
  EXPECT_GT(count_with_prefix(stacks, "jit_spinner;[truncated];") * 2, samples)
      << folded.substr(0, 2000);
  EXPECT_LE(deepest(stacks), symbolize::kMaxStackFrames);
  EXPECT_EQ(lines_with(run.log, "an inline chain of more than").size(), 1u) << run.log;

  // Its flame graph stays small too.
  std::string svg_path = out + "/inline.svg";
  auto rendered = run_measured({"render", folded_path, "-o", svg_path}, dir_.path());
  print_figures("its flame graph", rendered);
  EXPECT_EQ(rendered.exit_code, 0) << describe(rendered);
  EXPECT_LT(rendered.max_rss_kb, kRssBoundKb) << describe(rendered);
  std::error_code ignored;
  auto svg_size = fs::file_size(svg_path, ignored);
  std::printf("[ FIGURES  ] SVG: %ju bytes\n", static_cast<uintmax_t>(svg_size));
  EXPECT_GT(svg_size, 0u);
  EXPECT_LT(svg_size, kChainSvgBound);
}

TEST_F(HostileContainerTest, MapReplacedEveryFewMillisecondsIsReadOncePerInterval)
{
  // Four maps of 32 MiB, renamed over the map in turn every 3 ms; polled four times a second as a
  // JVM's.
  auto run = profile_heavy_map("hb-replace", {"replace", "JitSpinner.replace"},
                               "JitSpinner.replace", true);
  std::printf("[ FIGURES  ] read %ju bytes\n", static_cast<uintmax_t>(run.read_bytes));
  EXPECT_GT(run.read_bytes, 0u);
  EXPECT_LT(run.read_bytes, kReplacedMapReadBound) << describe(run);
  EXPECT_EQ(lines_with(run.log, "more to read than an interval allows").size(), 1u) << run.log;
}

TEST_F(HostileContainerTest, ProcessesOfOneContainerHoldNoMoreThanItsShare)
{
  // Eight processes of one container, each naming its code in a map of 256 Ki ranges (what one map
  // may hold; their names are read only as frames need them, the ranges are held): 24 MiB of ranges
  // each, and were it a few dozen processes, past the limit flamebpf is shipped with. Another
  // container beside them names its code in a small map. An account of 128 MiB between two targets
  // gives each 64 MiB.
  auto attacker = spin("hb-share", {"--comm", "attacker0", "many", "Attack.heavy"});
  for (int i = 1; i < kShareAttackers; ++i) {
    std::string comm = "attacker" + std::to_string(i);
    spin_another(attacker, comm, {"--comm", comm, "many", "Attack.heavy"});
  }
  spin("hb-victim", {"valid", "Victim.outer", "Victim.inner"});
  std::string out = dir_.path().string() + "/out";
  fs::create_directories(out);
  auto run = run_measured({"--cgroup", "hb-share", "--cgroup", "hb-victim", "--no-attach",
                           "--target-memory", "128", "-d", "4", "-o", out + "/share.folded"},
                          dir_.path());
  print_figures("eight maps of 256 Ki ranges in one container", run);
  expect_prompt(run, 4);
#ifndef FLAMEBPF_SANITIZED
  // Under ASan its quarantine of freed memory (256 MiB) and shadow dwarf the share: the plain pass
  // holds the bound, the sanitized one the rest.
  EXPECT_LT(run.max_rss_kb, kShareRssBoundKb) << describe(run);
#endif
  // Said once, for the container, with the option that helps.
  auto said = lines_with(run.log, "its share of flamebpf's memory");
  ASSERT_EQ(said.size(), 1u) << run.log;
  EXPECT_NE(said[0].find("target hb-share"), std::string::npos) << said[0];
  EXPECT_NE(said[0].find("--target-memory"), std::string::npos) << said[0];
  // The other container keeps its names; the attackers keep theirs as far as their share goes.
  auto victim = read_folded(out + "/share.hb-victim.folded");
  EXPECT_GT(total_count(victim), 30u) << describe(run);
  EXPECT_GT(count_containing(victim, "Victim.outer;Victim.inner"),
            spinning_samples(victim) * 9 / 10)
      << hottest_stacks(victim) << describe(run);
  auto attackers = read_folded(out + "/share.hb-share.folded");
  EXPECT_GT(count_containing(attackers, "Attack.heavy"), 0u) << hottest_stacks(attackers);
}

TEST_F(HostileContainerTest, MapOwnedByAnotherUserIsNotRead)
{
  // Root in the container gives its map to another user. A process's own map, and a map that
  // root owns, are read.
  auto foreign = spin("hb-foreign", {"--owner", "4242", "valid", "Foreign.planted"});
  spin("hb-own", {"valid", "Own.map"}, {"--user", "1000:1000"});
  auto rooted = spin("hb-rooted", {"valid", "Rooted.map"}, {"--user", "1000:1000"});
  std::string rooted_map = "/proc/" + std::to_string(rooted.pid) + "/root/tmp/perf-1.map";
  ASSERT_EQ(::chown(rooted_map.c_str(), 0, 0), 0) << std::strerror(errno);

  std::string out = dir_.path().string() + "/out";
  fs::create_directories(out);
  auto run = run_measured({"--all-containers", "--containers-only", "--no-attach", "-d", "3", "-o",
                           out + "/owner.folded"},
                          dir_.path());
  print_figures("maps of other users", run);
  expect_prompt(run, 3);
  auto named_share = [&](const std::string& container, const std::string& name) {
    auto stacks = read_folded(out + "/owner." + container + ".folded");
    uint64_t samples = total_count(stacks);
    EXPECT_GT(samples, 10u) << container << " was hardly sampled\n" << describe(run);
    return samples == 0 ? 0.0 : static_cast<double>(count_containing(stacks, name)) / samples;
  };
  EXPECT_EQ(named_share("hb-foreign", "Foreign.planted"), 0.0) << run.log;
  EXPECT_GT(named_share("hb-foreign", "[unknown]"), 0.5) << run.log;
  EXPECT_GT(named_share("hb-own", "Own.map"), 0.5) << run.log;
  EXPECT_GT(named_share("hb-rooted", "Rooted.map"), 0.5) << run.log;
  auto refused = lines_with(run.log, "owned by uid 4242");
  ASSERT_EQ(refused.size(), 1u) << run.log;
  EXPECT_NE(refused[0].find("/proc/" + std::to_string(foreign.pid) + "/root/tmp/perf-1.map"),
            std::string::npos)
      << refused[0];
  EXPECT_EQ(lines_with(run.log, "owned by uid").size(), 1u) << run.log;
}

} // namespace
} // namespace flamebpf::testing
