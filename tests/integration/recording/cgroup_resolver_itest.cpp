// Target resolution against real cgroup2 directories made for the test.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "target/cgroup_resolver.h"

namespace flamebpf::testing {
namespace {

TEST(CgroupResolver, NestedCgroupByAbsoluteAndRelativePath)
{
  ASSERT_EQ(::geteuid(), 0u) << "creating cgroups needs root";
  std::string mount = cgroup2_mount();
  TempCgroup parent;
  TempCgroup child(parent.path());
  struct stat status {};
  ASSERT_EQ(::stat(child.path().c_str(), &status), 0);

  for (const std::string& argument :
       {child.path(), child.relative_path() + "/",
        parent.relative_path() + "/./x/../" + child.path().substr(parent.path().size() + 1)}) {
    SCOPED_TRACE(argument);
    auto resolved = target::resolve_cgroup(argument, mount);
    ASSERT_TRUE(resolved.has_value()) << resolved.error().message;
    EXPECT_EQ(resolved->path, child.path());
    EXPECT_EQ(resolved->name, child.relative_path());
    EXPECT_EQ(resolved->level, 2u);
    EXPECT_EQ(resolved->cgroup_id, static_cast<uint64_t>(status.st_ino));
  }
}

TEST(CgroupResolver, UnknownCgroupNamesTheMount)
{
  std::string mount = cgroup2_mount();
  auto resolved = target::resolve_cgroup("flamebpf-no-such-cgroup", mount);
  ASSERT_FALSE(resolved.has_value());
  EXPECT_NE(resolved.error().message.find("unknown cgroup flamebpf-no-such-cgroup"),
            std::string::npos)
      << resolved.error().message;
  EXPECT_NE(resolved.error().message.find("ls " + mount), std::string::npos);
}

} // namespace
} // namespace flamebpf::testing
