#include <gtest/gtest.h>
#include <string>
#include <unistd.h>

#include "target/cpu_time.h"
#include "test_support.h"

namespace flamebpf::target {
namespace {

using flamebpf::testing::TempDir;
using flamebpf::testing::write_file;

TEST(CpuSecondsUsed, ACgroupTargetsFromItsCpuStat)
{
  TempDir cgroup;
  write_file(cgroup.path() / "cpu.stat", "usage_usec 2500000\nuser_usec 2000000\n");
  Target target;
  target.name = "web";
  target.cgroup_path = cgroup.path().string();
  auto used = cpu_seconds_used(target);
  ASSERT_TRUE(used.has_value()) << used.error().message;
  EXPECT_DOUBLE_EQ(*used, 2.5);

  // Hostile or broken: one line that names the file, no number.
  write_file(cgroup.path() / "cpu.stat", "usage_usec lots\n");
  used = cpu_seconds_used(target);
  ASSERT_FALSE(used.has_value());
  EXPECT_NE(used.error().message.find(cgroup.path().string() + "/cpu.stat has no usage_usec"),
            std::string::npos)
      << used.error().message;
  // Larger than any cpu.stat: only the budget is read, and its last line is cut.
  write_file(cgroup.path() / "cpu.stat",
             std::string(kMaxCpuStatBytes - 12, '\n') + "usage_usec 123456789\n");
  EXPECT_FALSE(cpu_seconds_used(target).has_value());

  target.cgroup_path = (cgroup.path() / "gone").string();
  used = cpu_seconds_used(target);
  ASSERT_FALSE(used.has_value());
  EXPECT_EQ(used.error().errno_value, ENOENT);
}

TEST(CpuSecondsUsed, AProcessTargetsFromItsStatInClockTicks)
{
  TempDir proc;
  long ticks = ::sysconf(_SC_CLK_TCK);
  write_file(proc.path() / "4242/stat", "4242 (burn er) R 1 2 3 4 5 6 7 8 9 10 " +
                                            std::to_string(3 * ticks) + " " +
                                            std::to_string(ticks) + " 0 0 20 0 1 0 99\n");
  Target target;
  target.pid = 4242;
  auto used = cpu_seconds_used(target, proc.path().string());
  ASSERT_TRUE(used.has_value()) << used.error().message;
  EXPECT_DOUBLE_EQ(*used, 4.0);

  write_file(proc.path() / "4242/stat", "4242 (burner) R 1 2\n");
  used = cpu_seconds_used(target, proc.path().string());
  ASSERT_FALSE(used.has_value());
  EXPECT_NE(used.error().message.find("/4242/stat has no CPU times"), std::string::npos)
      << used.error().message;

  // This process, live.
  target.pid = static_cast<uint32_t>(::getpid());
  auto before = cpu_seconds_used(target);
  ASSERT_TRUE(before.has_value()) << before.error().message;
  EXPECT_GE(*before, 0);
}

} // namespace
} // namespace flamebpf::target
