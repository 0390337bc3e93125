// The unwind tables' life in the sampler's maps, as flamebpf -v reports it at each drain: one
// table per distinct file however many processes map it, idle when the last of them exits (kept
// for the program's next run, within a bound).
#include <chrono>
#include <csignal>
#include <gtest/gtest.h>
#include <regex>
#include <string>
#include <unistd.h>
#include <vector>

#include "harness.h"
#include "sampler/features.h"
#include "temp_dir.h"
#include "wait.h"

namespace flamebpf::testing {
namespace {

// One "unwind tables:" line of the log.
struct TablesLine {
  uint64_t tables = 0;
  uint64_t rows = 0;
  uint64_t images = 0;
  uint64_t built = 0;
  uint64_t shared = 0;
  uint64_t idle = 0;
};

std::vector<TablesLine> tables_lines(const std::string& log)
{
  static const std::regex line_pattern(
      R"(unwind tables: (\d+) tables in (\d+) rows for (\d+) images; (\d+) files built, (\d+) shared)");
  std::vector<TablesLine> lines;
  for (const auto& line : lines_with(log, "unwind tables:")) {
    std::smatch match;
    if (!std::regex_search(line, match, line_pattern))
      continue;
    static const std::regex idle_pattern(R"((\d+) idle tables in \d+ rows)");
    std::smatch idle;
    uint64_t idle_tables = std::regex_search(line, idle, idle_pattern) ? std::stoull(idle[1]) : 0;
    lines.push_back({std::stoull(match[1]), std::stoull(match[2]), std::stoull(match[3]),
                     std::stoull(match[4]), std::stoull(match[5]), idle_tables});
  }
  return lines;
}

TEST(UnwindTablesTest, ProcessesShareTablesAndAnExitLeavesTheTablesNoOneElseUsesIdle)
{
  ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
  // Two processes of one program, and a third of another (deep_chain also maps libstdc++, libm
  // and libgcc_s) that is killed while flamebpf records.
  Child first({SPLIT_SORTER_BINARY, "60"});
  Child second({SPLIT_SORTER_BINARY, "60"});
  Child leaving({DEEP_CHAIN_BINARY, "60"});
  wait_until_busy(first.pid(), "split_sorter");
  wait_until_busy(second.pid(), "split_sorter");
  wait_until_busy(leaving.pid(), "deep_chain");
  TempDir dir;
  std::string log = dir.path().string() + "/log";
  Child flamebpf({FLAMEBPF_BINARY, "--pid", std::to_string(first.pid()), "--pid",
                  std::to_string(second.pid()), "--pid", std::to_string(leaving.pid()), "-d", "60",
                  "--interval", "0.2", "-v", "-o", dir.path().string() + "/out.folded"},
                 "", log);
  auto all_three_seen = [&] {
    auto lines = tables_lines(read_text(log));
    return !lines.empty() && lines.back().images == 3;
  };
  bool unwinder_off = false;
  ASSERT_TRUE(wait_until(
      [&] {
        unwinder_off = read_text(log).find("frame pointers only") != std::string::npos;
        return unwinder_off || all_three_seen();
      },
      std::chrono::seconds(30), "flamebpf to load the tables of all three processes"))
      << read_text(log);
  if (unwinder_off)
    GTEST_SKIP() << "this kernel lacks what the table unwinder needs: " << read_text(log);
  TablesLine all_three = tables_lines(read_text(log)).back();

  // Every file's table is built once: the second split_sorter's files, and deep_chain's libc,
  // ld.so and vDSO, are found among those built.
  EXPECT_GT(all_three.tables, 0u);
  EXPECT_EQ(all_three.tables, all_three.built) << read_text(log);
  EXPECT_GE(all_three.shared, 4u) << read_text(log);

  leaving.signal(SIGKILL);
  leaving.wait();
  ASSERT_TRUE(wait_until(
      [&] {
        auto lines = tables_lines(read_text(log));
        return lines.back().images == 2;
      },
      std::chrono::seconds(30), "flamebpf to forget the killed process"))
      << read_text(log);
  flamebpf.signal(SIGINT);
  EXPECT_EQ(flamebpf.wait(), 0) << read_text(log);

  // Its own files' tables are no longer in use, but idle; those the split_sorters share stay.
  TablesLine last = tables_lines(read_text(log)).back();
  EXPECT_GT(last.tables, 0u);
  EXPECT_LT(last.tables, all_three.tables) << read_text(log);
  EXPECT_LT(last.rows, all_three.rows) << read_text(log);
  EXPECT_EQ(all_three.idle, 0u);
  EXPECT_GT(last.idle, 0u) << read_text(log);
  EXPECT_LE(last.tables + last.idle, all_three.tables) << read_text(log);
}

// The maps' memory follows what they hold, not their budgets: a process whose tables fill a few
// row chunks, and whose stacks a few hundred counts, costs as much with 1 GiB of rows and 1 Mi
// counts as with the defaults (32 MiB, 16 Ki), but for the counts' hash buckets. Counts are
// allocated as they come only where the kernel lets perf_event programs use such maps.
TEST(UnwindTablesTest, MapMemoryFollowsTheTablesAndCountsNotTheBudgets)
{
  ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
  Child workload({DEEP_CHAIN_BINARY, "60"});
  wait_until_busy(workload.pid(), "deep_chain");
  // The maps' memory that the last "unwind tables:" line gives, and that line's rows.
  auto profile = [&](const std::vector<std::string>& budgets) -> std::pair<double, uint64_t> {
    TempDir dir;
    std::vector<std::string> args = {
        "--pid", std::to_string(workload.pid()),     "-d", "1.5", "--interval", "0.5", "-v",
        "-o",    dir.path().string() + "/out.folded"};
    args.insert(args.end(), budgets.begin(), budgets.end());
    auto run = run_flamebpf(args);
    EXPECT_EQ(run.exit_code, 0) << run.output;
    static const std::regex memory_pattern(R"(BPF maps take ([0-9.]+) MiB)");
    auto lines = lines_with(run.output, "unwind tables:");
    std::smatch match;
    if (lines.empty() || !std::regex_search(lines.back(), match, memory_pattern)) {
      ADD_FAILURE() << "no unwind tables line with the maps' memory\n" << run.output;
      return {0, 0};
    }
    auto tables = tables_lines(lines.back());
    return {std::stod(match[1]), tables.empty() ? 0 : tables.back().rows};
  };
  auto [default_memory, default_rows] = profile({});
  auto [large_memory, large_rows] = profile({"--unwind-memory", "1024"});
  EXPECT_GT(default_rows, 0u);
  EXPECT_EQ(large_rows, default_rows);
  // 1 GiB of rows would be 992 MiB more; the chunks the tables fill are the same.
  EXPECT_NEAR(large_memory, default_memory, 1.0);
  if (!sampler::hash_maps_allocate_on_demand())
    return;
  // 1 Mi counts in each of the two buffers: their hash buckets (16 bytes each, 32 MiB in all) are
  // made at once, their entries (about 100 bytes each, 200 MiB more) only as stacks are counted.
  auto [counted_memory, counted_rows] = profile({"--count-storage", "1048576"});
  EXPECT_EQ(counted_rows, default_rows);
  EXPECT_LE(counted_memory - default_memory, 32.0 + 1.0);
}

} // namespace
} // namespace flamebpf::testing
