// Stacks of programs built without frame pointers, unwound from their CFI, checked against perf
// record --call-graph dwarf on the same run of the same process (perf_oracle.h), and programs whose
// CFI is garbage.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <iostream>
#include <string>
#include <thread>
#include <unistd.h>

#include "harness.h"
#include "perf_oracle.h"
#include "process.h"

namespace flamebpf::testing {
namespace {

// Both tools sample the workload at once for this long. flamebpf samples at 4999 Hz: a busy
// process gives up to 30000 samples, which the split's tolerance (below) needs on a machine that
// others share and where the workload may get half a CPU. perf copies 8 KiB of stack per sample
// and unwinds it afterwards, so it samples at 999 Hz: up to 6000 samples, enough for the
// comparison of distributions.
constexpr int kFlamebpfHz = 4999;
constexpr int kPerfHz = 999;
constexpr double kSeconds = 6;

// Merge sort's recursion makes about every second sample a stack of its own, and an interval that
// a slow drain (ASan) stretches to 4 s holds 20000 samples at 4999 Hz: more distinct stacks than
// the default storage (sized for 99 Hz) keeps. These tests are about unwinding, so room is made, as
// flamebpf's warning asks.
constexpr int kStackStorage = 32768;

// The share of a workload's samples whose stack must reach main.
constexpr double kMinReachingMain = 0.95;

// split_sorter's callers run the same work 3:1 (tests/progs/split_sorter.c; timed with the
// thread's CPU clock, 2.99:1); the ratio of their samples must come within 10 % of it. With n
// samples the ratio's standard error is about 16 * sqrt(0.1875 / n): 0.12 at 3000 samples, 0.05
// at 15000, so that 10 % (0.3) is six of them.
constexpr double kSplit = 3;
constexpr double kSplitTolerance = 0.1;

// "Agree" means: the distribution of each tool's samples over the distinct main-rooted stacks
// (in comparable_stacks()'s common form) is the same up to a total variation distance of 0.15.
// Two tools sampling the same process at the same time draw independent samples from one
// distribution; with at least 3000 samples each over at most a few dozen distinct stacks,
// sampling alone makes the distance about 0.05. A tool that loses or misplaces the callers of any
// stack holding more than 15 % of the samples (glibc's qsort or memcpy from one caller; a frame of
// the deep chain) fails.
constexpr double kMaxDistance = 0.15;

// The deep chain's stack, root to leaf, in comparable_stacks()'s common form: main, run, 27
// levels of descend_a, descend_b and descend_c in turn, and spin (tests/progs/deep_chain.cpp).
std::string deep_chain_stack()
{
  std::string stack = "main;run";
  const char* levels[] = {"descend_a", "descend_b", "descend_c"};
  for (int level = 0; level < 27; ++level)
    stack += std::string(";") + levels[level % 3];
  return stack + ";spin";
}

// The oracle's own parts, on perf script text of the form it reads.
TEST(PerfOracleTest, CollapsesPerfScriptAndPutsNamesInCommonForm)
{
  const char* script = "split_sorter \n"
                       "\t          16d824 __memmove_avx512_unaligned_erms (/usr/lib/libc.so.6)\n"
                       "\t           3f9c0 msort_with_tmp.part.0 (/usr/lib/libc.so.6)\n"
                       "\t           3f9a3 msort_with_tmp.part.0 (/usr/lib/libc.so.6)\n"
                       "\t           3fd35 __GI___qsort_r (/usr/lib/libc.so.6)\n"
                       "\t            1372 sort_and_copy (/tmp/split_sorter)\n"
                       "\t            1459 run(double, unsigned long) (/tmp/split_sorter)\n"
                       "\t            113d main (/tmp/split_sorter)\n"
                       "\t           27304 __libc_start_main@@GLIBC_2.34 (/usr/lib/libc.so.6)\n"
                       "\n"
                       "split_sorter \n"
                       "\tffffffff81000000 asm_sysvec_apic_timer_interrupt ([kernel.kallsyms])\n"
                       "\t            beef [unknown] ([unknown])\n"
                       "\n";
  auto stacks = collapse_perf_script(script);
  ASSERT_EQ(stacks.size(), 2u);
  EXPECT_EQ(stacks.begin()->first, "split_sorter;[unknown]");
  EXPECT_EQ(stacks.rbegin()->first,
            "split_sorter;__libc_start_main@@GLIBC_2.34;main;run(double, unsigned long);"
            "sort_and_copy;__GI___qsort_r;msort_with_tmp.part.0;msort_with_tmp.part.0;"
            "__memmove_avx512_unaligned_erms");
  // flamebpf's names of the same frames, with a kernel and an inlined frame.
  FoldedStacks ours = {{"split_sorter;_start;main;run;sort_and_copy;qsort_r;msort_with_tmp.part.0;"
                        "__memcpy_avx512_unaligned_erms;irq_[k]",
                        3},
                       {"split_sorter;[unknown];spin_[i]", 1}};
  auto theirs = comparable_stacks(stacks, "split_sorter");
  auto mine = comparable_stacks(ours, "split_sorter");
  EXPECT_EQ(theirs, (FoldedStacks{{"main;run;sort_and_copy;qsort_r;msort_with_tmp;"
                                   "memmove_avx512_unaligned_erms",
                                   1},
                                  {kNoMain, 1}}));
  EXPECT_DOUBLE_EQ(share_reaching_main(mine), 0.75);
  EXPECT_DOUBLE_EQ(distribution_distance(theirs, mine), 0);
  EXPECT_DOUBLE_EQ(distribution_distance(theirs, {{"main;other", 5}}), 1);
  EXPECT_EQ(samples_under(mine, "main;run"), 3u);
}

// What flamebpf and perf record saw of one run of a workload, sampling it at the same time.
struct SideBySide {
  FoldedStacks flamebpf;        // comparable_stacks() of flamebpf's output
  FoldedStacks flamebpf_output; // flamebpf's folded output as it wrote it
  FoldedStacks perf;            // comparable_stacks() of perf's
  uint64_t flamebpf_samples = 0;
  size_t longest_flamebpf_stack = 0; // frames below comm, kernel frames included
  std::string flamebpf_log;          // flamebpf -v's stdout and stderr
  int flamebpf_exit_code = -1;
};

class CfiUnwindTest : public ::testing::Test {
protected:
  void SetUp() override
  {
    ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
    auto version = run_process({"/usr/bin/perf", "--version"}, {}, std::chrono::seconds(30));
    ASSERT_EQ(version.status, 0) << "perf, the oracle of these tests, does not run; try apt-get "
                                    "install linux-perf\n"
                                 << version.err;
  }

  // Runs binary (whose comm is comm) and profiles it with flamebpf --pid and perf record at once.
  SideBySide
  profile_side_by_side(const std::string& binary, const std::string& comm, PerfCallGraph call_graph)
  {
    SideBySide seen;
    Child workload({binary, std::to_string(kSeconds + 20)});
    wait_until_busy(workload.pid(), comm);
    std::string perf_dir = dir_.path().string() + "/perf";
    std::filesystem::create_directory(perf_dir);
    PerfRecording recording;
    std::thread perf(
        [&] { recording = perf_record(workload.pid(), kSeconds, kPerfHz, call_graph, perf_dir); });
    std::string out = dir_.path().string() + "/out.folded";
    auto run =
        run_flamebpf({"--pid", std::to_string(workload.pid()), "-F", std::to_string(kFlamebpfHz),
                      "--stack-storage", std::to_string(kStackStorage), "-d",
                      std::to_string(kSeconds), "-v", "-o", out});
    perf.join();
    seen.flamebpf_exit_code = run.exit_code;
    seen.flamebpf_log = run.output;
    auto folded = read_folded(out);
    for (const auto& [stack, count] : folded) {
      if (!stack.starts_with(comm + ";"))
        continue;
      seen.flamebpf_samples += count;
      seen.longest_flamebpf_stack =
          std::max<size_t>(seen.longest_flamebpf_stack,
                           static_cast<size_t>(std::count(stack.begin(), stack.end(), ';')));
    }
    seen.flamebpf = comparable_stacks(folded, comm);
    seen.flamebpf_output = folded;
    seen.perf = comparable_stacks(recording.stacks, comm);
    return seen;
  }

  TempDir dir_;
};

// flamebpf's log without libbpf's debug lines.
std::string own_log(const std::string& log)
{
  std::string kept;
  for (const auto& line : lines_with(log, "flamebpf"))
    kept += line.find("libbpf: ") == std::string::npos ? line + "\n" : "";
  return kept;
}

// The figures of a run, printed with the test's output whether it passes or not.
void print_figures(const SideBySide& seen)
{
  std::cout << fmt::format("flamebpf: {} samples, {:.1f}% reach main; perf record: {} samples, "
                           "{:.1f}% reach main; distance {:.3f}\n",
                           seen.flamebpf_samples, 100 * share_reaching_main(seen.flamebpf),
                           sample_count(seen.perf), 100 * share_reaching_main(seen.perf),
                           distribution_distance(seen.flamebpf, seen.perf));
}

std::string context_of(const SideBySide& seen)
{
  return "flamebpf | perf record:\n" + largest_differences(seen.flamebpf, seen.perf) +
         "flamebpf's hottest stacks as it wrote them:\n" + hottest_stacks(seen.flamebpf_output) +
         "flamebpf's log:\n" + own_log(seen.flamebpf_log);
}

// A file whose CFI is garbage is logged once, naming it, and counted in the tables' summary that
// flamebpf -v logs at each drain (the one file of the three the process maps: libc and ld.so are
// sound).
void expect_reported_once_and_counted(const std::string& log, const std::string& file)
{
  // Other lines may name the file for what else is read of it (its inlined functions).
  size_t about_cfi = 0;
  for (const auto& line : lines_with(log, file))
    about_cfi += line.find("FDE") != std::string::npos || line.find("CFI") != std::string::npos;
  EXPECT_EQ(about_cfi, 1u) << "a file whose CFI cannot be read is logged once, naming it\n"
                           << own_log(log);
  auto summaries = lines_with(log, "unwind tables: ");
  ASSERT_FALSE(summaries.empty()) << own_log(log);
  EXPECT_NE(summaries.back().find(" 1 partly malformed"), std::string::npos)
      << "the malformed file is not counted\n"
      << own_log(log);
}

// Checks what every workload's run must show: enough samples, perf's own stacks complete (the
// oracle works), flamebpf's stacks reaching main, and the two agreeing.
void expect_complete_and_agreeing(const SideBySide& seen)
{
  print_figures(seen);
  ASSERT_EQ(seen.flamebpf_exit_code, 0) << seen.flamebpf_log;
  ASSERT_GT(seen.flamebpf_samples, 1000u) << context_of(seen);
  ASSERT_GT(sample_count(seen.perf), 1000u) << context_of(seen);
  EXPECT_GE(share_reaching_main(seen.perf), kMinReachingMain)
      << "perf record --call-graph dwarf, the oracle, lost its stacks\n"
      << context_of(seen);
  EXPECT_GE(share_reaching_main(seen.flamebpf), kMinReachingMain) << context_of(seen);
  EXPECT_LE(distribution_distance(seen.flamebpf, seen.perf), kMaxDistance) << context_of(seen);
}

TEST_F(CfiUnwindTest, QsortAndMemcpyThroughGlibcReachMainWithTheCallerSplit)
{
  auto seen = profile_side_by_side(SPLIT_SORTER_BINARY, "split_sorter", PerfCallGraph::kDwarf);
  expect_complete_and_agreeing(seen);
  // Samples inside glibc (qsort's merge sort, memcpy) under each caller: the frames that only
  // CFI recovers, since glibc keeps no frame pointers.
  EXPECT_GT(samples_under(seen.flamebpf, "main;run;heavy_caller;sort_and_copy;qsort_r"), 0u)
      << context_of(seen);
  double heavy = static_cast<double>(samples_under(seen.flamebpf, "main;run;heavy_caller"));
  double light = static_cast<double>(samples_under(seen.flamebpf, "main;run;light_caller"));
  ASSERT_GT(light, 0) << context_of(seen);
  double perf_heavy = static_cast<double>(samples_under(seen.perf, "main;run;heavy_caller"));
  double perf_light = static_cast<double>(samples_under(seen.perf, "main;run;light_caller"));
  std::cout << fmt::format("split heavy:light: flamebpf {:.2f}, perf record {:.2f}\n",
                           heavy / light, perf_heavy / perf_light);
  EXPECT_NEAR(heavy / light, kSplit, kSplit * kSplitTolerance)
      << "perf record's split: " << perf_heavy / perf_light << "\n"
      << context_of(seen);
}

// Samples of comparable stacks that pass through frame.
uint64_t samples_through_frame(const FoldedStacks& comparable, const std::string& frame)
{
  uint64_t samples = 0;
  for (const auto& [stack, count] : comparable)
    if ((";" + stack + ";").find(";" + frame + ";") != std::string::npos)
      samples += count;
  return samples;
}

// Whether a frame keeps a Rust legacy name's hash ("::h" and 16 hex digits) or a v0 name's
// mangled form.
bool keeps_rust_mangling(const std::string& stack)
{
  for (size_t at = stack.find("::h"); at != std::string::npos; at = stack.find("::h", at + 1)) {
    size_t digits = 0;
    while (at + 3 + digits < stack.size() && std::isxdigit(stack[at + 3 + digits]))
      ++digits;
    if (digits == 16)
      return true;
  }
  return stack.find(";_R") != std::string::npos;
}

// Rust as `cargo build --release` builds it: no frame pointers, .eh_frame, and linked by lld,
// whose load segments share file pages (a mapping's offset then lies inside the segment before
// its own). Stacks reach main through std's runtime and agree with perf's; names are demangled
// without their hash.
TEST_F(CfiUnwindTest, RustReleaseBuildsReachMainWithTheCallerSplit)
{
  auto seen = profile_side_by_side(std::string(RUST_SPLITS_DIR) + "/split.legacy", "split.legacy",
                                   PerfCallGraph::kDwarf);
  expect_complete_and_agreeing(seen);
  for (const auto& [stack, count] : seen.flamebpf_output)
    EXPECT_FALSE(keeps_rust_mangling(stack)) << stack;
  double heavy = static_cast<double>(samples_through_frame(seen.flamebpf, "split::heavy"));
  double light = static_cast<double>(samples_through_frame(seen.flamebpf, "split::light"));
  ASSERT_GT(light, 0) << context_of(seen);
  EXPECT_NEAR(heavy / light, kSplit, kSplit * kSplitTolerance) << context_of(seen);
}

// The same program with v0 symbol mangling, which perf does not demangle: its names as rustfilt
// prints them, its stacks as complete.
TEST_F(CfiUnwindTest, RustV0NamesAreDemangled)
{
  Child workload({std::string(RUST_SPLITS_DIR) + "/split.v0"});
  wait_until_busy(workload.pid(), "split.v0");
  std::string out = dir_.path().string() + "/v0.folded";
  auto run =
      run_flamebpf({"--pid", std::to_string(workload.pid()), "-F", "4999", "-d", "2", "-o", out});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto comparable = comparable_stacks(read_folded(out), "split.v0");
  for (const auto& [stack, count] : read_folded(out))
    EXPECT_FALSE(keeps_rust_mangling(stack)) << stack;
  EXPECT_GE(share_reaching_main(comparable), kMinReachingMain);
  double heavy = static_cast<double>(samples_through_frame(comparable, "split::heavy"));
  double light = static_cast<double>(samples_through_frame(comparable, "split::light"));
  ASSERT_GT(light, 0);
  EXPECT_NEAR(heavy / light, kSplit, kSplit * kSplitTolerance);
}

TEST_F(CfiUnwindTest, DeepChainReachesMainThirtyFramesDeep)
{
  auto seen = profile_side_by_side(DEEP_CHAIN_BINARY, "deep_chain", PerfCallGraph::kDwarf);
  expect_complete_and_agreeing(seen);
  // Nearly all of the work is in spin at the bottom of the chain; the rest (the descent, the
  // clock read in run) is a few percent at most.
  auto chain = seen.flamebpf.find(deep_chain_stack());
  uint64_t full = chain == seen.flamebpf.end() ? 0 : chain->second;
  EXPECT_GE(static_cast<double>(full), 0.9 * static_cast<double>(sample_count(seen.flamebpf)))
      << "the 30 frames " << deep_chain_stack() << "\n"
      << context_of(seen);
}

// Samples of a handler whose share comes under a sender, among those of the sender.
uint64_t samples_through(const FoldedStacks& comparable,
                         const std::string& sender,
                         const std::string& handler)
{
  uint64_t samples = 0;
  for (const auto& [stack, count] : comparable) {
    if (stack.starts_with(sender + ";") && stack.find(";" + handler + ";") != std::string::npos)
      samples += count;
  }
  return samples;
}

// Work inside signal handlers: the unwinder steps through the kernel's signal frame, and for
// SIGUSR2 from the alternate signal stack back to the thread's, to the sender and main. perf
// record copies only the stack a sample was taken on, so it follows the handler on the thread's
// stack (a quarter of the work) but not the one on the alternate stack: it is the oracle of that
// quarter, and the split is checked against the workload's construction.
TEST_F(CfiUnwindTest, SignalHandlersOnEitherStackReachTheirSenderWithTheSplit)
{
  auto seen = profile_side_by_side(SIGNAL_SPINNER_BINARY, "signal_spinner", PerfCallGraph::kDwarf);
  print_figures(seen);
  ASSERT_EQ(seen.flamebpf_exit_code, 0) << seen.flamebpf_log;
  ASSERT_GT(seen.flamebpf_samples, 1000u) << context_of(seen);
  ASSERT_GT(sample_count(seen.perf), 1000u) << context_of(seen);
  EXPECT_GE(share_reaching_main(seen.flamebpf), kMinReachingMain) << context_of(seen);

  std::string own = "main;run;on_own_stack", alternate = "main;run;on_alternate_stack";
  double on_own = static_cast<double>(samples_under(seen.flamebpf, own));
  double on_alternate = static_cast<double>(samples_under(seen.flamebpf, alternate));
  ASSERT_GT(on_own, 0) << context_of(seen);
  double own_share = on_own / static_cast<double>(sample_count(seen.flamebpf));
  double perf_own_share = static_cast<double>(samples_under(seen.perf, own)) /
                          static_cast<double>(sample_count(seen.perf));
  std::cout << fmt::format("alternate:own {:.2f}; share under {}: flamebpf {:.3f}, perf record "
                           "{:.3f}\n",
                           on_alternate / on_own, own, own_share, perf_own_share);
  EXPECT_NEAR(on_alternate / on_own, kSplit, kSplit * kSplitTolerance) << context_of(seen);
  EXPECT_NEAR(own_share, perf_own_share, 0.05)
      << "perf record --call-graph dwarf follows the handler on the thread's stack\n"
      << context_of(seen);
  // Nearly every sample under a sender is in its handler (the rest: raise itself).
  EXPECT_GE(static_cast<double>(samples_through(seen.flamebpf, own, "handle_on_own_stack")),
            0.9 * on_own)
      << context_of(seen);
  EXPECT_GE(
      static_cast<double>(samples_through(seen.flamebpf, alternate, "handle_on_alternate_stack")),
      0.9 * on_alternate)
      << context_of(seen);
}

// The ELF file's .eh_frame is garbage (tests/progs/garble-eh-frame.sh) but the program keeps
// frame pointers in its own code: the unwinder must count and report the table it cannot build,
// not crash, and give stacks at least as complete as frame pointers do, measured on the same run
// by perf record --call-graph fp.
TEST_F(CfiUnwindTest, GarbageCfiIsReportedAndStacksAreAtLeastThoseOfFramePointers)
{
  std::string garbled = std::string(GARBLED_CFI_DIR) + "/split_sorter_fp";
  auto seen = profile_side_by_side(garbled, "split_sorter_fp", PerfCallGraph::kFramePointer);
  print_figures(seen);
  ASSERT_EQ(seen.flamebpf_exit_code, 0) << seen.flamebpf_log;
  ASSERT_GT(seen.flamebpf_samples, 1000u) << context_of(seen);
  ASSERT_GT(sample_count(seen.perf), 1000u) << context_of(seen);
  // Sampling noise between the two tools: a few percent at these sample counts.
  EXPECT_GE(share_reaching_main(seen.flamebpf), share_reaching_main(seen.perf) - 0.05)
      << "flamebpf | perf record --call-graph fp\n"
      << context_of(seen);
  // Every frame the kernel's frame-pointer unwinder finds in the program's own code.
  EXPECT_GE(samples_under(seen.flamebpf, "main;run;heavy_caller;sort_and_copy"),
            samples_under(seen.perf, "main;run;heavy_caller;sort_and_copy") * 9 / 10)
      << context_of(seen);
  expect_reported_once_and_counted(seen.flamebpf_log, garbled);
}

// The same garbage in a program without frame pointers: its own frames cannot be unwound, but the
// run survives, says why, and no stack runs beyond the unwinder's bound.
TEST_F(CfiUnwindTest, GarbageCfiWithoutFramePointersIsReportedAndBounded)
{
  std::string garbled = std::string(GARBLED_CFI_DIR) + "/split_sorter";
  auto seen = profile_side_by_side(garbled, "split_sorter", PerfCallGraph::kFramePointer);
  print_figures(seen);
  ASSERT_EQ(seen.flamebpf_exit_code, 0) << seen.flamebpf_log;
  EXPECT_GT(seen.flamebpf_samples, 1000u) << context_of(seen);
  EXPECT_GE(share_reaching_main(seen.flamebpf), share_reaching_main(seen.perf) - 0.05)
      << context_of(seen);
  // 127 user frames at most, a kernel stack of its own, and no endless walk on garbage.
  EXPECT_LE(seen.longest_flamebpf_stack, 127u + 127u) << context_of(seen);
  expect_reported_once_and_counted(seen.flamebpf_log, garbled);
}

} // namespace
} // namespace flamebpf::testing
