#include <filesystem>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "common/procfs.h"
#include "target/cgroup_resolver.h"
#include "test_support.h"

namespace flamebpf::target {
namespace {

TEST(RelativeToMount, EqualIsRoot)
{
  EXPECT_EQ(relative_to_mount("/sys/fs/cgroup", "/sys/fs/cgroup"), "/");
  EXPECT_EQ(relative_to_mount("/sys/fs/cgroup/", "/sys/fs/cgroup"), "/");
  EXPECT_EQ(relative_to_mount("/sys/fs/cgroup", "/sys/fs/cgroup//"), "/");
  EXPECT_EQ(relative_to_mount("/", "/"), "/");
}

TEST(RelativeToMount, Child)
{
  EXPECT_EQ(relative_to_mount("/sys/fs/cgroup/system.slice", "/sys/fs/cgroup"), "/system.slice");
  EXPECT_EQ(relative_to_mount("/sys/fs/cgroup/a/b/c", "/sys/fs/cgroup"), "/a/b/c");
  EXPECT_EQ(relative_to_mount("/sys/fs/cgroup/unified/a", "/sys/fs/cgroup/unified"), "/a");
  EXPECT_EQ(relative_to_mount("/a/b", "/"), "/a/b");
}

TEST(RelativeToMount, TrailingAndRepeatedSlashes)
{
  EXPECT_EQ(relative_to_mount("/sys/fs/cgroup/a/", "/sys/fs/cgroup/"), "/a");
  EXPECT_EQ(relative_to_mount("/sys/fs/cgroup//a///b//", "/sys/fs/cgroup"), "/a/b");
  EXPECT_EQ(relative_to_mount("/sys/fs/cgroup/./a/.", "/sys/fs/cgroup"), "/a");
}

TEST(RelativeToMount, DotDotIsNormalized)
{
  EXPECT_EQ(relative_to_mount("/sys/fs/cgroup/a/../b", "/sys/fs/cgroup"), "/b");
  EXPECT_EQ(relative_to_mount("/sys/fs/cgroup/a/..", "/sys/fs/cgroup"), "/");
  EXPECT_EQ(relative_to_mount("/sys/fs/cgroup/a/b", "/sys/fs/x/../cgroup"), "/a/b");
  EXPECT_EQ(relative_to_mount("/sys/fs/cgroup/..", "/sys/fs/cgroup"), "");
  EXPECT_EQ(relative_to_mount("/sys/fs/cgroup/../cgroup2/a", "/sys/fs/cgroup"), "");
}

TEST(RelativeToMount, OutsideIsEmpty)
{
  EXPECT_EQ(relative_to_mount("/etc", "/sys/fs/cgroup"), "");
  EXPECT_EQ(relative_to_mount("/sys/fs", "/sys/fs/cgroup"), "");
  // A shared prefix is not containment.
  EXPECT_EQ(relative_to_mount("/sys/fs/cgroupx", "/sys/fs/cgroup"), "");
  EXPECT_EQ(relative_to_mount("/sys/fs/cgroup-v2/a", "/sys/fs/cgroup"), "");
}

TEST(ResolveCgroup, ADirectoryOfAnotherFilesystemIsNotACgroup)
{
  flamebpf::testing::TempDir mount;
  std::filesystem::create_directories(mount.path() / "workload");
  auto resolved = resolve_cgroup("workload", mount.path().string());
  ASSERT_FALSE(resolved.has_value());
  EXPECT_NE(resolved.error().message.find("not a cgroup2 directory"), std::string::npos)
      << resolved.error().message;
  EXPECT_NE(resolved.error().message.find((mount.path() / "workload").string()), std::string::npos)
      << resolved.error().message;

  // The same with an absolute argument, and for the "mount" itself.
  resolved = resolve_cgroup((mount.path() / "workload").string(), mount.path().string());
  ASSERT_FALSE(resolved.has_value());
  EXPECT_NE(resolved.error().message.find("not a cgroup2 directory"), std::string::npos);
  resolved = resolve_cgroup("/", "/");
  ASSERT_FALSE(resolved.has_value());
  EXPECT_NE(resolved.error().message.find("not a cgroup2 directory"), std::string::npos);
}

TEST(ResolveCgroup, NonexistentIsUnknown)
{
  flamebpf::testing::TempDir mount;
  auto resolved = resolve_cgroup("no/such/group", mount.path().string());
  ASSERT_FALSE(resolved.has_value());
  EXPECT_EQ(resolved.error().errno_value, ENOENT);
  EXPECT_NE(resolved.error().message.find("unknown cgroup no/such/group"), std::string::npos)
      << resolved.error().message;
  EXPECT_NE(resolved.error().message.find("ls " + mount.path().string()), std::string::npos)
      << resolved.error().message;
}

TEST(ResolveCgroup, OutsideTheMountOrEmptyIsRefused)
{
  auto resolved = resolve_cgroup("/etc", "/sys/fs/cgroup");
  ASSERT_FALSE(resolved.has_value());
  EXPECT_NE(resolved.error().message.find("is not under the cgroup2 mount /sys/fs/cgroup"),
            std::string::npos)
      << resolved.error().message;
  resolved = resolve_cgroup("../..", "/sys/fs/cgroup");
  ASSERT_FALSE(resolved.has_value());
  EXPECT_NE(resolved.error().message.find("is not under the cgroup2 mount"), std::string::npos);
  EXPECT_FALSE(resolve_cgroup("", "/sys/fs/cgroup").has_value());
}

// The host's cgroup2 hierarchy; reading it needs no privilege.
class HostCgroup2 : public ::testing::Test {
protected:
  void SetUp() override
  {
    auto mount = procfs::cgroup2_mount();
    if (!mount)
      GTEST_SKIP() << "this host has no cgroup2 mount: " << mount.error().message;
    mount_ = *mount;
  }

  std::string mount_;
};

TEST_F(HostCgroup2, Root)
{
  for (const std::string& argument :
       {mount_, mount_ + "/", std::string("."), std::string("a/..")}) {
    SCOPED_TRACE(argument);
    auto resolved = resolve_cgroup(argument, mount_);
    ASSERT_TRUE(resolved.has_value()) << resolved.error().message;
    EXPECT_EQ(resolved->path, mount_);
    EXPECT_EQ(resolved->name, "root");
    EXPECT_EQ(resolved->level, 0u);
    EXPECT_NE(resolved->cgroup_id, 0u);
  }
}

TEST_F(HostCgroup2, InterfaceFileIsNotACgroup)
{
  auto resolved = resolve_cgroup("cgroup.procs", mount_);
  ASSERT_FALSE(resolved.has_value());
  EXPECT_NE(resolved.error().message.find("not a cgroup2 directory"), std::string::npos)
      << resolved.error().message;
}

} // namespace
} // namespace flamebpf::target
