// A Go service as release images ship it (stripped, static), in a real container with a read-only
// root: named from its own pclntab, read from outside the container, its stacks rooted where Go's
// are and the split of two callers of one leaf as their work is.
#include <filesystem>
#include <gtest/gtest.h>
#include <string>

#include "container_harness.h"
#include "go_splits.h"
#include "harness.h"
#include "temp_dir.h"

namespace flamebpf::testing {
namespace {

TEST(GoContainerTest, StrippedGoServiceIsNamedAndRootedWithItsSplit)
{
  ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
  auto versions = go_split_versions();
  ASSERT_FALSE(versions.empty()) << "no Go toolchain built the split workload";
  DockerDaemon& docker = DockerDaemon::shared();
  ContainersRemovedAtEnd removed(docker);
  TempDir dir;
  // The newest toolchain's build, a copy of the test's own: the container's program.
  std::string program = dir.path().string() + "/service";
  std::filesystem::copy_file(go_split(versions.back(), "split.stripped"), program);
  auto service = docker.run("go-service", {"--read-only", "-v", program + ":/usr/bin/service:ro"},
                            docker.burner_image(), {"/usr/bin/service"});
  wait_until_busy(service.pid, "service");
  std::string folded = dir.path().string() + "/go.folded";
  auto run = run_flamebpf({"--cgroup", "go-service", "-d", "2", "-F", "999", "-o", folded});
  ASSERT_EQ(run.exit_code, 0) << run.output;

  GoSplitShares shares = go_split_shares(read_folded(folded));
  ASSERT_GT(shares.total, 1000u) << run.output;
  expect_named_rooted_and_split(shares, run.output);
}

} // namespace
} // namespace flamebpf::testing
