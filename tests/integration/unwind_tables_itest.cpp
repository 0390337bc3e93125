// The unwind tables' life in the sampler's maps, as flamebpf -v reports it at each drain: one
// table per distinct file however many processes map it, and freed when the last of them exits.
#include <gtest/gtest.h>
#include <regex>
#include <string>
#include <unistd.h>
#include <vector>

#include "harness.h"
#include "temp_dir.h"

namespace flamebpf::testing {
namespace {

// One "unwind tables:" line of the log.
struct TablesLine {
  uint64_t tables = 0;
  uint64_t rows = 0;
  uint64_t images = 0;
  uint64_t built = 0;
  uint64_t shared = 0;
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
    lines.push_back({std::stoull(match[1]), std::stoull(match[2]), std::stoull(match[3]),
                     std::stoull(match[4]), std::stoull(match[5])});
  }
  return lines;
}

TEST(UnwindTablesTest, ProcessesShareTablesAndAnExitFreesTheTablesNoOneElseUses)
{
  ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
  // Two processes of one program, and a third of another (deep_chain also maps libstdc++, libm
  // and libgcc_s) that exits halfway through the recording.
  Child first({SPLIT_SORTER_BINARY, "30"});
  Child second({SPLIT_SORTER_BINARY, "30"});
  Child leaving({DEEP_CHAIN_BINARY, "3"});
  wait_until_busy(first.pid(), "split_sorter");
  wait_until_busy(second.pid(), "split_sorter");
  wait_until_busy(leaving.pid(), "deep_chain");
  TempDir dir;
  auto run =
      run_flamebpf({"--pid", std::to_string(first.pid()), "--pid", std::to_string(second.pid()),
                    "--pid", std::to_string(leaving.pid()), "-d", "7", "--interval", "0.5", "-v",
                    "-o", dir.path().string() + "/out.folded"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  if (run.output.find("stacks are unwound by frame pointers only") != std::string::npos)
    GTEST_SKIP() << "this kernel lacks what the table unwinder needs: " << run.output;
  auto lines = tables_lines(run.output);
  ASSERT_GE(lines.size(), 4u) << run.output;

  // While all three run: every file's table is built once, and the second split_sorter's files
  // (and deep_chain's libc, ld.so and vDSO) are found among those built.
  const TablesLine* all_three = nullptr;
  for (const auto& line : lines)
    if (line.images == 3 && !all_three)
      all_three = &line;
  ASSERT_NE(all_three, nullptr) << run.output;
  EXPECT_GT(all_three->tables, 0u) << run.output;
  EXPECT_EQ(all_three->tables, all_three->built) << run.output;
  EXPECT_GE(all_three->shared, 4u) << run.output;

  // After deep_chain exits: its own files' tables are gone, the shared ones stay.
  const TablesLine& last = lines.back();
  EXPECT_EQ(last.images, 2u) << run.output;
  EXPECT_GT(last.tables, 0u) << run.output;
  EXPECT_LT(last.tables, all_three->tables) << run.output;
  EXPECT_LT(last.rows, all_three->rows) << run.output;
}

} // namespace
} // namespace flamebpf::testing
