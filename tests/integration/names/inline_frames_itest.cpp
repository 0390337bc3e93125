// Native functions the compiler inlined, named from DWARF: a stripped program's from the debug file
// its .gnu_debuglink names, an unstripped one's from its own .debug_info. The index is built in
// the background, so the first interval may lack them; every later one has them, in the folded
// output (flamegraph.pl's "_[i]"), in the SVG (the inlined colour) and in pprof (lines of the
// caller's location in its file, as `go tool pprof` shows them).
#include <algorithm>
#include <filesystem>
#include <gtest/gtest.h>
#include <map>
#include <string>
#include <vector>

#include "dumps/dump_files.h"
#include "harness.h"
#include "pprof_tool.h"
#include "process.h"
#include "temp_dir.h"
#include "wait.h"

namespace flamebpf::testing {
namespace {

namespace fs = std::filesystem;

// The fixture's chain (tests/progs/inline_spinner.c): leaf_mix inlined into middle_step, inlined
// into outer_work, which is a function of its own.
constexpr const char* kOuter = "outer_work";

std::string inline_spinner(const std::string& name)
{
  return std::string(INLINE_SPINNERS_DIR) + "/" + name;
}

struct Windows {
  ProcessOutput output;
  std::vector<std::map<std::string, uint64_t>> folded; // each interval's stacks
  std::vector<std::string> pprof;                      // each interval's pprof file
  std::string log() const { return output.out + output.err; }
};

// Profiles program (run with its seconds) in windows of 1 s, in every format.
Windows profile_windows(const std::string& program, const fs::path& dir, int seconds)
{
  Child spinner({program, std::to_string(seconds + 3)});
  std::string comm = fs::path(program).filename().string().substr(0, 15);
  wait_until_busy(spinner.pid(), comm);
  std::string out = (dir / "out").string();
  Windows windows;
  windows.output = run_process({FLAMEBPF_BINARY, "--pid", std::to_string(spinner.pid()), "-d",
                                std::to_string(seconds), "--output-dir", out, "--interval", "1",
                                "--format", "folded,svg,pprof", "-F", "999", "-v"},
                               {}, std::chrono::seconds(seconds + 30));
  std::string target =
      out + "/" + dumps::target_directory(comm + "-" + std::to_string(spinner.pid()));
  for (const auto& window : dumps::list_dumps(target)) {
    for (const auto& file : window.files) {
      if (file.ends_with(".folded"))
        windows.folded.push_back(read_folded(target + "/" + file));
      else if (file.ends_with(".pb.gz"))
        windows.pprof.push_back(target + "/" + file);
    }
  }
  return windows;
}

// The functions the fixture's code inlines into outer_work: its loop, the loop's body, and its
// clock.
bool fixture_inlines(const std::string& frame)
{
  return frame == "middle_step_[i]" || frame == "leaf_mix_[i]" || frame == "seconds_now_[i]";
}

struct Shares {
  uint64_t outer = 0;  // samples whose stack holds outer_work
  uint64_t middle = 0; // of those, with middle_step inlined into it: the loop, where it spins
  uint64_t leaf = 0;   // of those, with leaf_mix inlined into middle_step
  uint64_t wrong = 0;  // of those, with an inlined frame in the wrong place or not the fixture's
};

Shares shares_of(const std::map<std::string, uint64_t>& folded)
{
  Shares shares;
  for (const auto& [stack, count] : folded) {
    auto frames = split_frames(stack);
    auto outer = std::find(frames.begin(), frames.end(), kOuter);
    if (outer == frames.end())
      continue;
    shares.outer += count;
    std::vector<std::string> after(outer + 1, frames.end());
    bool middle = !after.empty() && after[0] == "middle_step_[i]";
    shares.middle += middle ? count : 0;
    shares.leaf += middle && after.size() > 1 && after[1] == "leaf_mix_[i]" ? count : 0;
    for (size_t i = 0; i < after.size(); ++i) {
      bool inlined = after[i].ends_with("_[i]");
      if (inlined && (!fixture_inlines(after[i]) || (after[i] == "leaf_mix_[i]" && i == 0)))
        shares.wrong += count;
    }
  }
  return shares;
}

// The windows after the first: by then the index is built.
void expect_inlined_frames(const Windows& windows, const std::string& what)
{
  ASSERT_EQ(windows.output.status, 0) << windows.log();
  ASSERT_GE(windows.folded.size(), 3u) << windows.log();
  Shares later;
  for (size_t i = 1; i < windows.folded.size(); ++i) {
    Shares window = shares_of(windows.folded[i]);
    later.outer += window.outer;
    later.middle += window.middle;
    later.leaf += window.leaf;
    later.wrong += window.wrong;
  }
  ASSERT_GT(later.outer, 1000u) << hottest_stacks(windows.folded.back());
  EXPECT_EQ(later.wrong, 0u) << hottest_stacks(windows.folded.back());
  // outer_work spins in middle_step's loop, most of it in leaf_mix's arithmetic; which address
  // is whose is checked against addr2line in dwarf_inlines_test.cpp.
  EXPECT_GE(later.middle * 100, later.outer * 95) << hottest_stacks(windows.folded.back());
  EXPECT_GE(later.leaf * 100, later.outer * 50) << hottest_stacks(windows.folded.back());
  EXPECT_EQ(windows.log().find("inlined functions:"), std::string::npos) << windows.log();
  EXPECT_NE(windows.log().find("ranges of inlined functions"), std::string::npos) << windows.log();
  std::printf("[ FIGURES  ] %s: of %llu samples in outer_work, %llu in middle_step_[i], %llu in "
              "leaf_mix_[i] below it\n",
              what.c_str(), static_cast<unsigned long long>(later.outer),
              static_cast<unsigned long long>(later.middle),
              static_cast<unsigned long long>(later.leaf));
}

TEST(InlinedFrames, StrippedProgramsAreNamedFromTheDebugFileItsLinkNames)
{
  TempDir dir("/var/tmp");
  // The stripped program, and beside it the debug file its .gnu_debuglink names.
  std::string program = (dir.path() / "inline_spinner").string();
  fs::copy_file(inline_spinner("gcc-dwarf5.stripped"), program);
  fs::copy_file(inline_spinner("gcc-dwarf5.debug"), dir.path() / "gcc-dwarf5.debug");
  auto windows = profile_windows(program, dir.path(), 4);
  expect_inlined_frames(windows, "stripped, gcc DWARF 5 debug file");

  // pprof: the inlined functions are lines of outer_work's location, and go tool pprof counts
  // leaf_mix as the folded output does.
  std::string go = find_go();
  ASSERT_FALSE(go.empty()) << "go tool pprof is needed: install golang-go";
  PprofTool pprof(go, (dir.path() / "pprof").string());
  auto top = pprof.top({"-top", "-nodecount=100", "-nodefraction=0", "-sample_index=samples"},
                       windows.pprof.back());
  auto folded = folded_counts(windows.folded.back());
  ASSERT_TRUE(top.contains("leaf_mix")) << pprof.run({"-top"}, windows.pprof.back());
  EXPECT_EQ(top["leaf_mix"], folded["leaf_mix"]);
  EXPECT_EQ(top["middle_step"].cum, folded["middle_step"].cum);
  std::string traces = pprof.run({"-traces"}, windows.pprof.back());
  EXPECT_NE(traces.find("leaf_mix (inline)"), std::string::npos) << traces;
}

TEST(InlinedFrames, ClangProgramsOwnDwarfNamesThem)
{
  TempDir dir("/var/tmp");
  std::string program = (dir.path() / "inline_clang").string();
  fs::copy_file(inline_spinner("clang-dwarf5"), program);
  expect_inlined_frames(profile_windows(program, dir.path(), 4), "unstripped, clang DWARF 5");
}

} // namespace
} // namespace flamebpf::testing
