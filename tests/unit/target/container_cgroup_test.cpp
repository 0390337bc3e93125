#include <gtest/gtest.h>

#include "target/container_cgroup.h"
#include "test_support.h"

namespace flamebpf::target {
namespace {

using flamebpf::testing::read_data;

constexpr const char* kId = "474d492e3c1f0a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7bbeec";
constexpr const char* kPod = "5f2b1c3d-8e4a-4b6c-9d7e-0a1b2c3d4e5f";

// The container of a process whose /proc/<pid>/cgroup is the fixture tests/data/cgroup/<name>.
std::optional<ContainerCgroupMatch> container_of_fixture(const std::string& name)
{
  return container_of_process(parse_proc_cgroup(read_data("cgroup/" + name)));
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
        // A runtime that left the cgroup2 path at "/": the v1 hierarchies still name it.
        RuntimeCase{"docker_v1_only.txt", Runtime::kDocker, "/docker/{id}", ""},
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

TEST(ProcessCgroup, ParsesHybridLines)
{
  auto lines = parse_proc_cgroup(read_data("cgroup/docker_hybrid.txt"));
  ASSERT_EQ(lines.size(), 14u);
  EXPECT_EQ(lines[0].hierarchy, 13u);
  EXPECT_EQ(lines[0].controllers, "misc");
  EXPECT_EQ(lines[0].path, "/");
  EXPECT_EQ(lines[11].controllers, "cpu,cpuacct");
  EXPECT_EQ(lines[13].hierarchy, 0u);
  EXPECT_EQ(lines[13].controllers, "");
}

TEST(ProcessCgroup, SkipsMalformedLinesAndKeepsColonsInPaths)
{
  auto lines = parse_proc_cgroup(read_data("cgroup/malformed.txt"));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].path, std::string("/docker/") + kId);
  auto sub = parse_proc_cgroup(read_data("cgroup/docker_subcgroup_v2.txt"));
  ASSERT_EQ(sub.size(), 1u);
  EXPECT_TRUE(sub[0].path.ends_with("/workers/a:b"));
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
