// Go binaries as they ship, stripped or not, inlined or not, position-independent or not: every Go
// function named from the binary's own pclntab, frameless leaves unwound by its stack-pointer
// tables, inlined calls named from its inline tree, and every stack rooted where Go's own are
// (runtime.goexit for goroutines, runtime.main under it), so that the split of two callers of one
// leaf shows as their work is; and cgo, where C frames on a thread's system stack sit above the
// goroutine's Go frames.
#include <csignal>
#include <filesystem>
#include <gtest/gtest.h>
#include <map>
#include <string>
#include <vector>

#include "go_splits.h"
#include "harness.h"
#include "process.h"
#include "temp_dir.h"

namespace flamebpf::testing {
namespace {

// How the leaf is reached from heavy and light.
enum class Leaf {
  kInlinedWork, // built with inlining: work is inlined into heavy and light
  kFramedWork,  // -gcflags=-l: work is a frame of its own
  kC,           // cgo_split.go: spin is C, called through cgo on the thread's system stack
};

struct Variant {
  const char* file;
  Leaf leaf;
};

// Each recording's length: 15,000 samples at 4999 Hz, in windows of 0.5 s (agent mode), of which
// the first two are left out. They hold the start, unwound by frame pointers (sampling starts
// while the unwinding program loads, 0.1 to 0.3 s, and the process's tables are built after its
// first sample), which lose a frameless leaf's caller; bench/overhead.sh measures the start.
// Inlined calls are named once the inline index is built in the background, and the windows
// symbolized before are named again at the recording's end.
constexpr double kSeconds = 3;
constexpr size_t kStartWindows = 2;

class GoBinaries : public ::testing::TestWithParam<std::string> {};

TEST_P(GoBinaries, EveryFunctionNamedEveryStackRootedAndTheSplitShows)
{
  TempDir dir;
  for (Variant variant :
       {Variant{"split", Leaf::kInlinedWork}, Variant{"split.stripped", Leaf::kInlinedWork},
        Variant{"split.noinline", Leaf::kFramedWork},
        Variant{"split.noinline.stripped", Leaf::kFramedWork},
        Variant{"split.pie.external", Leaf::kInlinedWork}, Variant{"cgo", Leaf::kC}}) {
    SCOPED_TRACE(variant.file);
    std::string binary = go_split(GetParam(), variant.file);
    Child workload({binary});
    wait_until_busy(workload.pid(), std::string(variant.file).substr(0, 15));
    std::string out = (dir.path() / variant.file).string();
    auto run = run_process({FLAMEBPF_BINARY, "--pid", std::to_string(workload.pid()), "-d",
                            std::to_string(kSeconds), "--interval", "0.5", "-F", "4999",
                            "--output-dir", out, "--format", "folded"},
                           {}, std::chrono::seconds(60));
    workload.signal(SIGKILL);
    workload.wait();
    ASSERT_EQ(run.status, 0) << run.out << run.err;
    // The target's directory: the process's name and pid.
    std::string target;
    for (const auto& entry : std::filesystem::directory_iterator(out))
      if (entry.is_directory())
        target = entry.path().string();
    GoSplitShares shares = go_split_shares(read_dumps_after(target, kStartWindows));
    // Some samples are lost to a busy machine: 80 % of those past the start must be there.
    ASSERT_GT(static_cast<double>(shares.total), 4999 * 0.8 * (kSeconds - 1)) << run.err;
    expect_named_rooted_and_split(shares, run.err);
    uint64_t under_split = shares.heavy + shares.light;
    switch (variant.leaf) {
    case Leaf::kInlinedWork:
      // An inlined call is named once the binary's inline tree is indexed, off the report
      // cycle; the intervals symbolized before are named again at the end.
      EXPECT_GE(shares.work_inlined, under_split * 95 / 100)
          << "main.work inlined: " << shares.work_inlined << " of " << under_split;
      break;
    case Leaf::kFramedWork:
      EXPECT_GE(shares.work_framed, under_split * 95 / 100)
          << "main.work as a frame: " << shares.work_framed << " of " << under_split;
      break;
    case Leaf::kC:
      EXPECT_GE(shares.through_cgo, under_split * 95 / 100)
          << "C under Go through cgo: " << shares.through_cgo << " of " << under_split;
      break;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Toolchains,
                         GoBinaries,
                         ::testing::ValuesIn(go_split_versions()),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           return go_test_name(param.param);
                         });

} // namespace
} // namespace flamebpf::testing
