#include <gtest/gtest.h>

#include "common/procfs.h"
#include "target/container_cgroup.h"
#include "test_support.h"

namespace flamebpf::target {
namespace {

using flamebpf::testing::read_data;

constexpr const char* kId = "474d492e3c1f0a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7bbeec";
constexpr const char* kPod = "5f2b1c3d-8e4a-4b6c-9d7e-0a1b2c3d4e5f";

// The cgroup2 path of a process whose /proc/<pid>/cgroup is the fixture tests/data/cgroup/<name>.
std::optional<std::string> cgroup2_path_of_fixture(const std::string& name)
{
  return procfs::parse_cgroup2_path(read_data("cgroup/" + name));
}

// The container of such a process, found as flamebpf finds it: from its cgroup2 path.
std::optional<ContainerCgroupMatch> container_of_fixture(const std::string& name)
{
  auto path = cgroup2_path_of_fixture(name);
  return path ? container_of_cgroup(*path) : std::nullopt;
}

struct RuntimeCase {
  const char* fixture;
  Runtime runtime;
  std::string cgroup; // with {id} for the container ID
  const char* pod;
};

class ProcessCgroupFixture : public ::testing::TestWithParam<RuntimeCase> {};

TEST_P(ProcessCgroupFixture, FindsTheContainerItsRuntimeAndCgroup)
{
  const auto& expected = GetParam();
  auto match = container_of_fixture(expected.fixture);
  ASSERT_TRUE(match.has_value()) << expected.fixture;
  EXPECT_EQ(match->id, kId);
  EXPECT_EQ(match->runtime, expected.runtime) << runtime_name(match->runtime);
  std::string cgroup = expected.cgroup;
  cgroup.replace(cgroup.find("{id}"), 4, kId);
  EXPECT_EQ(match->cgroup, cgroup);
  EXPECT_EQ(match->pod_uid, expected.pod);
}

INSTANTIATE_TEST_SUITE_P(
    EveryRuntime,
    ProcessCgroupFixture,
    ::testing::Values(
        RuntimeCase{"docker_hybrid.txt", Runtime::kDocker, "/docker/{id}", ""},
        RuntimeCase{"docker_systemd_v2.txt", Runtime::kDocker, "/system.slice/docker-{id}.scope",
                    ""},
        RuntimeCase{"docker_subcgroup_v2.txt", Runtime::kDocker, "/docker/{id}", ""},
        RuntimeCase{"containerd_k8s_systemd_v2.txt", Runtime::kContainerd,
                    "/kubepods.slice/kubepods-burstable.slice/"
                    "kubepods-burstable-pod5f2b1c3d_8e4a_4b6c_9d7e_0a1b2c3d4e5f.slice/"
                    "cri-containerd-{id}.scope",
                    kPod},
        RuntimeCase{"kubepods_cgroupfs_v2.txt", Runtime::kKubernetes,
                    "/kubepods/burstable/pod5f2b1c3d-8e4a-4b6c-9d7e-0a1b2c3d4e5f/{id}", kPod},
        RuntimeCase{"kubepods_guaranteed_systemd_v2.txt", Runtime::kCrio,
                    "/kubepods.slice/kubepods-pod5f2b1c3d_8e4a_4b6c_9d7e_0a1b2c3d4e5f.slice/"
                    "crio-{id}.scope",
                    kPod},
        RuntimeCase{"podman_cgroupfs_hybrid.txt", Runtime::kPodman, "/libpod_parent/libpod-{id}",
                    ""},
        RuntimeCase{"podman_systemd_v2.txt", Runtime::kPodman, "/machine.slice/libpod-{id}.scope",
                    ""},
        RuntimeCase{"malformed.txt", Runtime::kDocker, "/docker/{id}", ""}));

TEST(ProcessCgroup, MonitorsAndHostProcessesAreNoContainers)
{
  EXPECT_FALSE(container_of_fixture("crio_conmon_v2.txt").has_value());
  EXPECT_FALSE(container_of_fixture("podman_conmon_v2.txt").has_value());
  EXPECT_FALSE(container_of_fixture("host_process_v2.txt").has_value());
}

TEST(ProcessCgroup, OnlyTheCgroup2LineCounts)
{
  // Among the v1 hierarchies' lines of a hybrid host.
  EXPECT_EQ(cgroup2_path_of_fixture("docker_hybrid.txt"), std::string("/docker/") + kId);
  // A runtime that left the cgroup2 path at "/": flamebpf follows cgroup2 only, so the v1 lines
  // that name the container are not read.
  EXPECT_EQ(cgroup2_path_of_fixture("docker_v1_only.txt"), "/");
  EXPECT_FALSE(container_of_fixture("docker_v1_only.txt").has_value());
  EXPECT_EQ(procfs::parse_cgroup2_path("1:name=systemd:/docker/x\n"), std::nullopt);
}

TEST(ProcessCgroup, SkipsMalformedLinesAndKeepsColonsInPaths)
{
  EXPECT_EQ(cgroup2_path_of_fixture("malformed.txt"), std::string("/docker/") + kId);
  auto sub = cgroup2_path_of_fixture("docker_subcgroup_v2.txt");
  ASSERT_TRUE(sub.has_value());
  EXPECT_TRUE(sub->ends_with("/workers/a:b"));
}

TEST(ContainerOfCgroup, OutermostContainerWins)
{
  // Docker in Docker: the outer container is the one the host knows.
  std::string inner(64, 'b');
  auto match = container_of_cgroup(std::string("/docker/") + kId + "/docker/" + inner);
  ASSERT_TRUE(match.has_value());
  EXPECT_EQ(match->id, kId);
}

TEST(ContainerOfCgroup, OnlyFullLowercaseIdsCount)
{
  EXPECT_FALSE(container_of_cgroup("/docker/474d492e3c1f").has_value());
  std::string upper(kId);
  upper[0] = 'A';
  EXPECT_FALSE(container_of_cgroup("/docker/" + upper).has_value());
  EXPECT_FALSE(container_of_cgroup(std::string("/system.slice/docker-") + kId + "x.scope"));
  EXPECT_TRUE(container_of_cgroup(std::string("/custom-parent/") + kId).has_value());
  EXPECT_EQ(container_of_cgroup(std::string("/custom-parent/") + kId)->runtime, Runtime::kUnknown);
}

TEST(PodOfComponent, BothDrivers)
{
  EXPECT_EQ(pod_of_component(std::string("pod") + kPod), kPod);
  EXPECT_EQ(pod_of_component("kubepods-besteffort-pod5f2b1c3d_8e4a_4b6c_9d7e_0a1b2c3d4e5f.slice"),
            kPod);
  EXPECT_EQ(pod_of_component("kubepods-pod5f2b1c3d_8e4a_4b6c_9d7e_0a1b2c3d4e5f.slice"), kPod);
  EXPECT_FALSE(pod_of_component("kubepods-besteffort.slice").has_value());
  EXPECT_FALSE(pod_of_component("podcast").has_value());
}

} // namespace
} // namespace flamebpf::target
