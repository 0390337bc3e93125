// Frames in the vDSO (the kernel's clock reads, mapped into every process: Go's time.now, Java's
// System.nanoTime) are named as perf names them, from flamebpf's own vDSO, the same image.
#include <cstdio>
#include <gtest/gtest.h>
#include <string>
#include <unistd.h>

#include "harness.h"
#include "process.h"
#include "temp_dir.h"

namespace flamebpf::testing {
namespace {

TEST(VdsoNames, ClockReadsAreNamed)
{
  ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
  TempDir dir;
  auto burner = copy_burner(dir.path(), "burner_clock");
  Child workload({burner, "--clock", "3"});
  wait_until_started(workload.pid(), "burner_clock");
  std::string out = dir.path().string() + "/out.folded";
  auto run = run_flamebpf({"--pid", std::to_string(workload.pid()), "-d", "2", "-o", out});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto folded = read_folded(out);
  uint64_t total = 0;
  uint64_t in_vdso = 0;
  uint64_t named = 0;
  for (const auto& [stack, count] : folded) {
    total += count;
    // perf's names: glibc's __clock_gettime calls the vDSO's __vdso_clock_gettime (whose alias,
    // at the same address, is clock_gettime).
    bool named_here = stack.ends_with(";__clock_gettime;__vdso_clock_gettime") ||
                      stack.ends_with(";__clock_gettime;clock_gettime");
    in_vdso += named_here || stack.ends_with(";[vdso]") ? count : 0;
    named += named_here ? count : 0;
  }
  ASSERT_GT(total, 100u) << hottest_stacks(folded);
  // Most of the loop's time is the clock read itself.
  EXPECT_GE(in_vdso * 2, total) << hottest_stacks(folded);
  EXPECT_EQ(named, in_vdso) << hottest_stacks(folded);
  std::printf("[ FIGURES  ] %llu of %llu samples in the vDSO, %llu of them named\n",
              static_cast<unsigned long long>(in_vdso), static_cast<unsigned long long>(total),
              static_cast<unsigned long long>(named));
}

} // namespace
} // namespace flamebpf::testing
