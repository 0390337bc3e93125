#include <gtest/gtest.h>

#include "pipeline/output_paths.h"
#include "profile/by_target.h"

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

TEST(OutputPathForTarget, TargetsThatMeetAfterSanitizingGetTwoFiles)
{
  auto names = profile::target_file_names({"a/b", "a_b", "../../etc/passwd"});
  EXPECT_EQ(output_path_for_target("out.folded", names.at("a_b")), "out.a_b.folded");
  EXPECT_NE(output_path_for_target("out.folded", names.at("a/b")), "out.a_b.folded");
  std::string escaped = output_path_for_target("/x/out.folded", names.at("../../etc/passwd"));
  EXPECT_TRUE(escaped.starts_with("/x/out._.._.._etc_passwd_")) << escaped;
  EXPECT_EQ(escaped.find('/', 3), std::string::npos) << escaped;
}

TEST(DefaultOutputPath, TimestampedInTheCurrentDirectory)
{
  auto path = default_output_path();
  EXPECT_TRUE(path.starts_with("./flamebpf-")) << path;
  EXPECT_TRUE(path.ends_with("Z.folded")) << path;
}

} // namespace
} // namespace flamebpf::pipeline
