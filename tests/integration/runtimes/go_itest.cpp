// Go binaries as they ship, stripped or not, inlined or not, position-independent or not: every Go
// function named from the binary's own pclntab, frameless leaves unwound by its stack-pointer
// tables, inlined calls named from its inline tree, and every stack rooted where Go's own are
// (runtime.goexit for goroutines, runtime.main under it), so that the split of two callers of one
// leaf shows as their work is; and cgo, where C frames on a thread's system stack sit above the
// goroutine's Go frames.
#include <csignal>
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
  kUnchecked,   // inlined, its inline tree checked elsewhere (the unit tests of the pclntab)
};

struct Variant {
  const char* file;
  Leaf leaf;
  // The recording's length: inlined calls are named once the inline index is built in the
  // background, which a recording of 2 s leaves three of its four intervals for; the other checks
  // hold for every sample, and 1.5 s at 4999 Hz gives 7,500 of them.
  const char* seconds;
};

struct Shares {
  uint64_t total = 0, named = 0, rooted = 0, heavy = 0, light = 0, work_inlined = 0,
           work_framed = 0, through_cgo = 0;
  std::vector<std::string> unnamed_examples;
};

Shares shares_of(const std::map<std::string, uint64_t>& stacks)
{
  Shares shares;
  for (const auto& [stack, count] : stacks) {
    shares.total += count;
    // An address left unnamed reads "<file>+0x<offset>".
    bool named = stack.find("+0x") == std::string::npos;
    shares.named += named ? count : 0;
    if (!named && shares.unnamed_examples.size() < 3)
      shares.unnamed_examples.push_back(stack);
    bool rooted = stack.find(";runtime.goexit;") != std::string::npos ||
                  stack.find(";runtime.main;") != std::string::npos;
    shares.rooted += rooted ? count : 0;
    shares.heavy += stack.find(";main.heavy;") != std::string::npos ? count : 0;
    shares.light += stack.find(";main.light;") != std::string::npos ? count : 0;
    shares.work_inlined += stack.find(";main.work_[i];main.spin") != std::string::npos ? count : 0;
    shares.work_framed += stack.find(";main.work;main.spin") != std::string::npos ? count : 0;
    // Go's frames, the switch to the system stack (Go 1.19's asmcgocall keeps its caller's
    // frame pointer, so runtime.cgocall is passed; later ones keep a frame), then cgo's C
    // wrapper and the C leaf.
    bool through_cgo = stack.find(";main._Cfunc_spin.abi0;") != std::string::npos &&
                       stack.find(";runtime.asmcgocall.abi0;_cgo_") != std::string::npos &&
                       stack.ends_with("_Cfunc_spin;spin");
    shares.through_cgo += through_cgo ? count : 0;
  }
  return shares;
}

class GoBinaries : public ::testing::TestWithParam<std::string> {};

TEST_P(GoBinaries, EveryFunctionNamedEveryStackRootedAndTheSplitShows)
{
  TempDir dir;
  for (Variant variant :
       {Variant{"split", Leaf::kInlinedWork, "2"},
        Variant{"split.stripped", Leaf::kInlinedWork, "2"},
        Variant{"split.noinline", Leaf::kFramedWork, "1.5"},
        Variant{"split.noinline.stripped", Leaf::kFramedWork, "1.5"},
        Variant{"split.pie.external", Leaf::kUnchecked, "1.5"}, Variant{"cgo", Leaf::kC, "1.5"}}) {
    SCOPED_TRACE(variant.file);
    std::string binary = go_split(GetParam(), variant.file);
    Child workload({binary});
    wait_until_busy(workload.pid(), std::string(variant.file).substr(0, 15));
    std::string folded = (dir.path() / (std::string(variant.file) + ".folded")).string();
    auto run = run_process({FLAMEBPF_BINARY, "--pid", std::to_string(workload.pid()), "-d",
                            variant.seconds, "--interval", "0.5", "-F", "4999", "-o", folded},
                           {}, std::chrono::seconds(60));
    workload.signal(SIGKILL);
    workload.wait();
    ASSERT_EQ(run.status, 0) << run.out << run.err;
    Shares shares = shares_of(read_folded(folded));
    // Some samples are lost to a busy machine: 80 % must be there.
    ASSERT_GT(static_cast<double>(shares.total), 4999 * 0.8 * std::stod(variant.seconds))
        << run.err;
    EXPECT_GE(shares.named * 100, shares.total * 99)
        << shares.named << " of " << shares.total << " named; e.g. "
        << (shares.unnamed_examples.empty() ? "" : shares.unnamed_examples[0]) << "\n"
        << run.err;
    EXPECT_GE(shares.rooted * 100, shares.total * 95)
        << shares.rooted << " of " << shares.total << " reach runtime.goexit or runtime.main";
    ASSERT_GT(shares.light, 0u);
    double ratio = static_cast<double>(shares.heavy) / static_cast<double>(shares.light);
    EXPECT_GT(ratio, 2.7) << shares.heavy << " under heavy, " << shares.light << " under light";
    EXPECT_LT(ratio, 3.3) << shares.heavy << " under heavy, " << shares.light << " under light";
    uint64_t under_split = shares.heavy + shares.light;
    switch (variant.leaf) {
    case Leaf::kInlinedWork:
      // An inlined call is named once the binary's inline tree is indexed, off the report
      // cycle: the samples of the intervals before (the first of four here) name heavy and light
      // alone.
      EXPECT_GE(shares.work_inlined, under_split / 2)
          << "main.work inlined: " << shares.work_inlined << " of " << under_split;
      break;
    case Leaf::kFramedWork:
      EXPECT_GE(shares.work_framed, under_split * 95 / 100)
          << "main.work as a frame: " << shares.work_framed << " of " << under_split;
      break;
    case Leaf::kUnchecked:
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
