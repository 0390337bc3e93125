// Whether a profile adds up, against the real kernel: a recording sets each target's samples
// against the CPU time its cgroup used and says, once, why a target's profile falls short. (Busy
// targets that are covered whole: agent_itest.cpp and serve_itest.cpp; the kernel's maps too
// small: AgentTest.ForkStormFillsTheMapsAndEveryDropIsCounted.)
#include <chrono>
#include <gtest/gtest.h>
#include <regex>
#include <string>
#include <unistd.h>

#include "harness.h"
#include "process.h"

namespace flamebpf::testing {
namespace {

using namespace std::chrono_literals;

TEST(CoverageTest, AStrippedProgramFallsShortForNamingInTheSubtitleAndOneLogLine)
{
  ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
  TempDir dir;
  TempCgroup target;
  // No symbol table and no debug file: every frame of the program reads burner_bare+0x….
  std::string bare = copy_burner(dir.path(), "burner_bare");
  auto stripped = run_process({"/usr/bin/strip", "--strip-all", bare}, {}, 30s);
  ASSERT_EQ(stripped.status, 0) << stripped.err;
  Child workload({bare, "15"}, target.path());
  wait_until_busy(workload.pid(), "burner_bare");

  std::string out = dir.path().string() + "/out.svg";
  auto run = run_flamebpf({"--cgroup", target.path(), "-F", "199", "-d", "2", "-o", out});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::smatch subtitle;
  std::string svg = read_text(out);
  ASSERT_TRUE(std::regex_search(svg, subtitle, std::regex("coverage ([0-9]+)% \\(naming\\)</")))
      << svg.substr(0, 3000);
  std::printf("[ FIGURES  ] coverage %s%%\n", subtitle[1].str().c_str());
  EXPECT_LT(std::stoi(subtitle[1]), 10) << run.output;
  auto warnings = lines_with(run.output, "its profile covers");
  ASSERT_EQ(warnings.size(), 1u) << run.output;
  EXPECT_NE(warnings[0].find("is naming: frames were left unnamed"), std::string::npos)
      << warnings[0];
}

} // namespace
} // namespace flamebpf::testing
