#include <cstdlib>
#include <gtest/gtest.h>
#include <unistd.h>

#include "pipeline/outputs.h"
#include "profile/by_target.h"

namespace flamebpf::pipeline {
namespace {

TEST(OutputPathForTarget, NameGoesBeforeTheExtension)
{
  EXPECT_EQ(output_path_for_target("out.folded", "web"), "out.web.folded");
  EXPECT_EQ(output_path_for_target("/var/x/profile.v1.folded", "db"),
            "/var/x/profile.v1.db.folded");
  EXPECT_EQ(output_path_for_target("out", "web"), "out.web");
  EXPECT_EQ(output_path_for_target("/var/x/all.pb.gz", "web"), "/var/x/all.web.pb.gz");
  EXPECT_EQ(output_path_for_target("/var/x/.pb.gz", "web"), "/var/x/.pb.gz.web");
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

TEST(ProfileFileAccess, OwnerOnlyAndGivenToTheSudoUser)
{
  ::setenv("SUDO_UID", "1234", 1);
  ::setenv("SUDO_GID", "5678", 1);
  FileAccess access = profile_file_access();
  EXPECT_EQ(access.mode, 0600u);
  if (::geteuid() == 0) {
    ASSERT_TRUE(access.owner_uid.has_value());
    EXPECT_EQ(*access.owner_uid, 1234u);
    EXPECT_EQ(access.owner_gid, 5678u);
  } else {
    EXPECT_FALSE(access.owner_uid.has_value()); // only root can give a file away
  }
  for (const char* bad : {"", "12x", "-1", "4294967295", "99999999999"}) {
    ::setenv("SUDO_UID", bad, 1);
    EXPECT_FALSE(profile_file_access().owner_uid.has_value()) << bad;
  }
  ::setenv("SUDO_UID", "1234", 1);
  ::unsetenv("SUDO_GID");
  EXPECT_FALSE(profile_file_access().owner_uid.has_value());
  ::unsetenv("SUDO_UID");
  EXPECT_FALSE(profile_file_access().owner_uid.has_value());
}

TEST(DefaultOutputPath, TimestampedInTheCurrentDirectory)
{
  auto path = default_output_path();
  EXPECT_TRUE(path.starts_with("./flamebpf-")) << path;
  EXPECT_TRUE(path.ends_with("Z.folded")) << path;
}

} // namespace
} // namespace flamebpf::pipeline
