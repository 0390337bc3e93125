#include <algorithm>
#include <gtest/gtest.h>
#include <string>
#include <unistd.h>
#include <vector>

#include "common/procfs.h"
#include "test_support.h"

namespace flamebpf::procfs {
namespace {

using flamebpf::testing::read_data;
using flamebpf::testing::TempDir;
using flamebpf::testing::write_file;

std::vector<MountEntry> mounts_of(const std::string& fixture)
{
  return parse_mountinfo(read_data("mountinfo/" + fixture));
}

const MountEntry* find_mount(const std::vector<MountEntry>& mounts, const std::string& point)
{
  auto it = std::find_if(mounts.begin(), mounts.end(),
                         [&](const MountEntry& m) { return m.mount_point == point; });
  return it == mounts.end() ? nullptr : &*it;
}

TEST(ParseMountinfo, HybridLayoutHasCgroup2BesideV1Controllers)
{
  auto mounts = mounts_of("hybrid.txt");
  ASSERT_EQ(mounts.size(), 19u);
  const MountEntry* memory = find_mount(mounts, "/sys/fs/cgroup/memory");
  ASSERT_NE(memory, nullptr);
  EXPECT_EQ(memory->fs_type, "cgroup");
  EXPECT_EQ(memory->root, "/");
  EXPECT_EQ(memory->source, "cgroup");
  const MountEntry* tmpfs = find_mount(mounts, "/sys/fs/cgroup");
  ASSERT_NE(tmpfs, nullptr);
  EXPECT_EQ(tmpfs->fs_type, "tmpfs");

  EXPECT_EQ(find_cgroup2_mount(mounts), "/sys/fs/cgroup/unified");
}

TEST(ParseMountinfo, UnifiedLayoutWithOptionalFields)
{
  auto mounts = mounts_of("unified.txt");
  ASSERT_EQ(mounts.size(), 9u);
  const MountEntry* root = find_mount(mounts, "/");
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(root->fs_type, "ext4");
  EXPECT_EQ(root->source, "/dev/nvme0n1p2");
  // "shared:4" sits between the options and the separator.
  const MountEntry* cgroup = find_mount(mounts, "/sys/fs/cgroup");
  ASSERT_NE(cgroup, nullptr);
  EXPECT_EQ(cgroup->fs_type, "cgroup2");
  EXPECT_EQ(cgroup->source, "cgroup2");

  EXPECT_EQ(find_cgroup2_mount(mounts), "/sys/fs/cgroup");
}

TEST(ParseMountinfo, NoCgroup2MountGivesNullopt)
{
  auto mounts = mounts_of("no_cgroup2.txt");
  ASSERT_EQ(mounts.size(), 7u);
  EXPECT_EQ(find_cgroup2_mount(mounts), std::nullopt);
  EXPECT_EQ(find_cgroup2_mount({}), std::nullopt);
}

TEST(ParseMountinfo, PrefersTheMountOfTheHierarchyRoot)
{
  auto mounts = mounts_of("nested_first.txt");
  ASSERT_EQ(mounts.size(), 4u);
  EXPECT_EQ(mounts[1].root, "/kubepods.slice/kubepods-pod42.slice");
  EXPECT_EQ(mounts[1].mount_point, "/sys/fs/cgroup");
  EXPECT_EQ(find_cgroup2_mount(mounts), "/host/sys/fs/cgroup");

  // Without the root's mount, a mount of a subtree is still better than nothing.
  mounts.pop_back();
  EXPECT_EQ(find_cgroup2_mount(mounts), "/sys/fs/cgroup");
}

TEST(ParseMountinfo, DecodesOctalEscapes)
{
  auto mounts = mounts_of("escapes.txt");
  ASSERT_EQ(mounts.size(), 6u);
  EXPECT_EQ(mounts[1].mount_point, "/mnt/my disk");
  EXPECT_EQ(mounts[1].source, "/dev/my disk");
  EXPECT_EQ(mounts[2].root, "/sub\\dir");
  EXPECT_EQ(mounts[2].mount_point, "/mnt/tab\there");
  // Not escapes: a non-octal digit, and a backslash too close to the end.
  EXPECT_EQ(mounts[4].mount_point, "/mnt/not\\08escape");
  EXPECT_EQ(mounts[5].mount_point, "/mnt/trailing\\04");

  EXPECT_EQ(find_cgroup2_mount(mounts), "/run/my cgroups/v2");
}

TEST(ParseMountinfo, SkipsMalformedLines)
{
  auto mounts = mounts_of("malformed.txt");
  ASSERT_EQ(mounts.size(), 2u);
  EXPECT_EQ(mounts[0].mount_point, "/sys/fs/cgroup");
  EXPECT_EQ(mounts[0].fs_type, "cgroup2");
  EXPECT_EQ(mounts[1].mount_point, "/sys/fs/bpf");
  EXPECT_EQ(find_cgroup2_mount(mounts), "/sys/fs/cgroup");
}

TEST(Cgroup2Mount, ReadsSelfMountinfoUnderProcRoot)
{
  TempDir proc;
  write_file(proc.path() / "self/mountinfo", read_data("mountinfo/hybrid.txt"));
  auto mount = cgroup2_mount(proc.path().string());
  ASSERT_TRUE(mount.has_value()) << mount.error().message;
  EXPECT_EQ(*mount, "/sys/fs/cgroup/unified");

  write_file(proc.path() / "self/mountinfo", read_data("mountinfo/no_cgroup2.txt"));
  mount = cgroup2_mount(proc.path().string());
  ASSERT_FALSE(mount.has_value());
  EXPECT_NE(mount.error().message.find("no cgroup2 filesystem is mounted"), std::string::npos)
      << mount.error().message;
}

TEST(Cgroup2Mount, MissingMountinfoIsAnError)
{
  TempDir proc;
  auto mount = cgroup2_mount(proc.path().string());
  ASSERT_FALSE(mount.has_value());
  EXPECT_EQ(mount.error().errno_value, ENOENT);
}

TEST(ParseCpuList, RangesAndSingles)
{
  auto cpus = parse_cpu_list("0-3,8,10-11");
  ASSERT_TRUE(cpus.has_value()) << cpus.error().message;
  EXPECT_EQ(*cpus, (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
}

TEST(ParseCpuList, SingleCpuWithAndWithoutNewline)
{
  EXPECT_EQ(parse_cpu_list("0"), (std::vector<int>{0}));
  EXPECT_EQ(parse_cpu_list("0\n"), (std::vector<int>{0}));
  EXPECT_EQ(parse_cpu_list("5-6\n"), (std::vector<int>{5, 6}));
}

TEST(ParseCpuList, RejectsMalformedLists)
{
  for (const char* bad : {"", "\n", "a", "1-", "-1", "3-1", "0,,1", "1-2-3", "0;1", "1 2", "70000",
                          "0-99999", "99999999999999999999"}) {
    auto cpus = parse_cpu_list(bad);
    EXPECT_FALSE(cpus.has_value()) << "accepted \"" << bad << "\"";
  }
  auto cpus = parse_cpu_list("3-1");
  ASSERT_FALSE(cpus.has_value());
  EXPECT_NE(cpus.error().message.find("malformed CPU list \"3-1\""), std::string::npos)
      << cpus.error().message;
}

TEST(OnlineCpus, ReadsSysRoot)
{
  TempDir sys;
  write_file(sys.path() / "devices/system/cpu/online", "0-1,4\n");
  EXPECT_EQ(online_cpus(sys.path().string()), (std::vector<int>{0, 1, 4}));
}

TEST(OnlineCpus, OnlyPossibleCpusCount)
{
  // A CPU listed online that is not possible (a stale or tampered sysfs) is not sampled.
  TempDir sys;
  write_file(sys.path() / "devices/system/cpu/online", "0-3\n");
  write_file(sys.path() / "devices/system/cpu/possible", "0-1\n");
  EXPECT_EQ(online_cpus(sys.path().string()), (std::vector<int>{0, 1}));
  write_file(sys.path() / "devices/system/cpu/possible", "4-5\n");
  auto none = online_cpus(sys.path().string());
  ASSERT_FALSE(none.has_value());
  EXPECT_NE(none.error().message.find("no CPU is both online and possible"), std::string::npos)
      << none.error().message;
}

TEST(ReadFile, CapsAtMaxBytes)
{
  TempDir dir;
  std::string content;
  for (int i = 0; content.size() < 100000; ++i)
    content += std::to_string(i) + '\n';
  write_file(dir.path() / "big", content);
  std::string path = (dir.path() / "big").string();

  auto whole = read_file(path);
  ASSERT_TRUE(whole.has_value()) << whole.error().message;
  EXPECT_EQ(*whole, content);

  auto small = read_file(path, 10);
  ASSERT_TRUE(small.has_value());
  EXPECT_EQ(*small, content.substr(0, 10));

  // Larger than one read() chunk, smaller than the file.
  auto middle = read_file(path, 20000);
  ASSERT_TRUE(middle.has_value());
  EXPECT_EQ(*middle, content.substr(0, 20000));

  auto nothing = read_file(path, 0);
  ASSERT_TRUE(nothing.has_value());
  EXPECT_EQ(*nothing, "");
}

TEST(ReadFile, ReadsProcFilesThatReportSizeZero)
{
  auto status = read_file("/proc/self/status");
  ASSERT_TRUE(status.has_value()) << status.error().message;
  EXPECT_NE(status->find("Pid:\t" + std::to_string(::getpid()) + "\n"), std::string::npos);
}

TEST(ReadFile, MissingFileNamesThePath)
{
  auto text = read_file("/nonexistent/flamebpf-unit-test");
  ASSERT_FALSE(text.has_value());
  EXPECT_EQ(text.error().errno_value, ENOENT);
  EXPECT_NE(text.error().message.find("/nonexistent/flamebpf-unit-test"), std::string::npos)
      << text.error().message;
}

TEST(ReadComm, StripsTheNewline)
{
  TempDir proc;
  write_file(proc.path() / "42/comm", "burner\n");
  EXPECT_EQ(read_comm(42, proc.path().string()), "burner");
  EXPECT_EQ(read_comm(43, proc.path().string()), std::nullopt);
}

TEST(ReadTgid, FromStatus)
{
  TempDir proc;
  write_file(proc.path() / "4243/status", "Name:\tjava\nUmask:\t0022\nState:\tR (running)\n"
                                          "Tgid:\t4242\nNgid:\t0\nPid:\t4243\nPPid:\t1\n");
  EXPECT_EQ(read_tgid(4243, proc.path().string()), 4242u);
  write_file(proc.path() / "5/status", "Name:\tx\nTgid:\t0\n");
  EXPECT_EQ(read_tgid(5, proc.path().string()), std::nullopt);
  write_file(proc.path() / "6/status", "Name:\tx\nPid:\t6\n");
  EXPECT_EQ(read_tgid(6, proc.path().string()), std::nullopt);
  EXPECT_EQ(read_tgid(7, proc.path().string()), std::nullopt);

  auto pid = static_cast<uint32_t>(::getpid());
  EXPECT_EQ(read_tgid(pid), pid);
}

TEST(StatusField, ValuesOfTheNamedLineOnly)
{
  std::string status = "Name:\tUid\nPPid:\t1\nPid:\t4243\nUid:\t0\t1000\t0\t0\nNSpid:\t4243\t7\n";
  EXPECT_EQ(status_field(status, "Pid"), 4243u);
  EXPECT_EQ(status_field(status, "Uid", 1), 1000u);
  EXPECT_EQ(status_field(status, "Uid", 4), std::nullopt);
  EXPECT_EQ(status_field(status, "NSpid", -1), 7u);
  EXPECT_EQ(status_field(status, "Name"), std::nullopt);
  EXPECT_EQ(status_field(status, "Gid"), std::nullopt);
  EXPECT_EQ(status_field("NSpid:\t12\t-1\n", "NSpid", 0), std::nullopt);
  EXPECT_EQ(status_line(status, "PPid"), "\t1");
  EXPECT_EQ(status_line(status, "Tgid"), std::nullopt);
}

TEST(CatchesSignal, CaughtAndNotIgnored)
{
  // SIGQUIT is 3: bit 2 of the masks.
  EXPECT_TRUE(catches_signal("SigIgn:\t0000000000000000\nSigCgt:\t0000000101005ccd\n", 3));
  EXPECT_FALSE(catches_signal("SigIgn:\t0000000000000004\nSigCgt:\t0000000101005ccd\n", 3));
  EXPECT_FALSE(catches_signal("SigIgn:\t0000000000000000\nSigCgt:\t0000000101005cc9\n", 3));
  EXPECT_TRUE(catches_signal("SigCgt:\t4\n", 3));
  EXPECT_FALSE(catches_signal("Name:\tjava\n", 3));
  EXPECT_FALSE(catches_signal("SigIgn:\tx\nSigCgt:\t4\n", 3));
  EXPECT_FALSE(catches_signal("SigCgt:\t4 4\n", 3));
  EXPECT_TRUE(catches_signal("SigCgt:\t8000000000000000\n", 64));
  EXPECT_FALSE(catches_signal("SigCgt:\tffffffffffffffff\n", 65));
}

TEST(Cgroup2Path, TheCgroup2LineOfAProcess)
{
  EXPECT_EQ(parse_cgroup2_path("1:name=systemd:/a\n0::/system.slice/x.service\n"),
            "/system.slice/x.service");
  EXPECT_EQ(parse_cgroup2_path("0::/a:b"), "/a:b");
  EXPECT_EQ(parse_cgroup2_path("0::relative\n"), std::nullopt);
  EXPECT_EQ(parse_cgroup2_path(""), std::nullopt);

  TempDir proc;
  write_file(proc.path() / "42/cgroup", "0::/docker/abc\n");
  EXPECT_EQ(read_cgroup2_path(42, proc.path().string()), "/docker/abc");
  EXPECT_EQ(read_cgroup2_path(43, proc.path().string()), std::nullopt);
}

TEST(LiveStartTime, ParsesPastAnyNameAndRefusesTheDead)
{
  // Field 22 after a name with spaces and parentheses, as a process can choose.
  std::string stat = "4242 (a) b (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 19 0 "
                     "987654 4000000000 9000 18446744073709551615\n";
  EXPECT_EQ(live_start_time_in_stat(stat), 987654u);
  std::string zombie = stat;
  zombie[zombie.find(") S ") + 2] = 'Z';
  EXPECT_EQ(live_start_time_in_stat(zombie), std::nullopt);
  EXPECT_EQ(live_start_time_in_stat("4242 (java) S 1 2 3\n"), std::nullopt);
  EXPECT_EQ(live_start_time_in_stat("no parenthesis"), std::nullopt);
  EXPECT_EQ(live_start_time_in_stat(""), std::nullopt);

  auto self = static_cast<uint32_t>(::getpid());
  auto own = live_start_time(self);
  ASSERT_TRUE(own.has_value());
  EXPECT_EQ(live_start_time(self), own); // the same process, the same start
  EXPECT_EQ(live_start_time(self, "/nonexistent"), std::nullopt);
}

TEST(CpuTicksInStat, UserAndSystemTimePastAnyName)
{
  std::string stat = "4242 (a) b (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 19 0 "
                     "987654 4000000000 9000 18446744073709551615\n";
  EXPECT_EQ(cpu_ticks_in_stat(stat), 8u);
  // A zombie's time still counts: it is the process's until it is reaped.
  std::string zombie = stat;
  zombie[zombie.find(") S ") + 2] = 'Z';
  EXPECT_EQ(cpu_ticks_in_stat(zombie), 8u);
  EXPECT_EQ(cpu_ticks_in_stat("4242 (w) S 1 2 3 4 5 6 7 8 9 10 11\n"), std::nullopt); // cut
  EXPECT_EQ(cpu_ticks_in_stat("4242 (w) S 1 2 3 4 5 6 7 8 9 10 -1 3\n"), std::nullopt);
  EXPECT_EQ(cpu_ticks_in_stat("4242 (w) S 1 2 3 4 5 6 7 8 9 10 18446744073709551615 1\n"),
            std::nullopt); // the sum does not fit
  EXPECT_EQ(cpu_ticks_in_stat("4242 (w) S 1 2 3 4 5 6 7 8 9 10 1x 3\n"), std::nullopt);
  EXPECT_EQ(cpu_ticks_in_stat("no parenthesis"), std::nullopt);
  EXPECT_EQ(cpu_ticks_in_stat(""), std::nullopt);
}

TEST(CgroupCpuUsage, UsageUsecOfWholeLinesOnly)
{
  EXPECT_EQ(cgroup_cpu_usage_usec("usage_usec 95890287568\nuser_usec 88205667689\n"
                                  "system_usec 7684619878\nnice_usec 0\n"),
            95890287568u);
  // Not first, and among lines this parser does not know.
  EXPECT_EQ(cgroup_cpu_usage_usec("nr_periods 0\ncore_sched.force_idle_usec 0\nusage_usec 7\n"),
            7u);
  // A line cut by the read's budget is no number to trust: "usage_usec 12" of "usage_usec 1234".
  EXPECT_EQ(cgroup_cpu_usage_usec("user_usec 1\nusage_usec 12"), std::nullopt);
  EXPECT_EQ(cgroup_cpu_usage_usec("usage_usec\n"), std::nullopt);
  EXPECT_EQ(cgroup_cpu_usage_usec("usage_usec -5\n"), std::nullopt);
  EXPECT_EQ(cgroup_cpu_usage_usec("usage_usec 99999999999999999999999\n"), std::nullopt);
  EXPECT_EQ(cgroup_cpu_usage_usec("usage_usec 5 6\n"), std::nullopt);
  EXPECT_EQ(cgroup_cpu_usage_usec("usage_usecs 5\n"), std::nullopt);
  EXPECT_EQ(cgroup_cpu_usage_usec(std::string("usage_usec \0 5\n", 15)), std::nullopt);
  EXPECT_EQ(cgroup_cpu_usage_usec(""), std::nullopt);
}

} // namespace
} // namespace flamebpf::procfs
