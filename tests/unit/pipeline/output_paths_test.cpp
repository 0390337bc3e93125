#include <gtest/gtest.h>

#include "pipeline/output_paths.h"

namespace flamebpf::pipeline {
namespace {

TEST(OutputPathForTarget, NameGoesBeforeTheExtension)
{
  EXPECT_EQ(output_path_for_target("out.folded", "web"), "out.web.folded");
  EXPECT_EQ(output_path_for_target("/var/x/profile.v1.folded", "db"),
            "/var/x/profile.v1.db.folded");
  EXPECT_EQ(output_path_for_target("out", "web"), "out.web");
  EXPECT_EQ(output_path_for_target("dir.d/out", "web"), "dir.d/out.web");
  EXPECT_EQ(output_path_for_target(".hidden", "web"), ".hidden.web");
}

TEST(OutputPathForTarget, NameCannotLeaveTheDirectory)
{
  EXPECT_EQ(output_path_for_target("out.folded", "system.slice/nginx.service"),
            "out.system.slice_nginx.service.folded");
  EXPECT_EQ(output_path_for_target("out.folded", "../../etc/passwd"),
            "out._._.._etc_passwd.folded");
  EXPECT_EQ(output_path_for_target("out.folded", ""), "out._.folded");
  EXPECT_EQ(output_path_for_target("out.folded", "a b;c\n"), "out.a_b_c_.folded");
}

TEST(DefaultOutputPath, TimestampedInTheCurrentDirectory)
{
  auto path = default_output_path();
  EXPECT_TRUE(path.starts_with("./flamebpf-")) << path;
  EXPECT_TRUE(path.ends_with("Z.folded")) << path;
}

} // namespace
} // namespace flamebpf::pipeline
