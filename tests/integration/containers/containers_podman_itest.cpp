// flamebpf against real podman containers (runc, cgroupfs manager): a container named by its
// podman name or short ID, and every container at once with one file per podman name. flamebpf
// learns podman's names from conmon's command line, and finds the container's cgroup at
// /libpod_parent/libpod-<id>.
#include <chrono>
#include <filesystem>
#include <gtest/gtest.h>
#include <thread>
#include <unistd.h>

#include "container_harness.h"
#include "harness.h"

namespace flamebpf::testing {
namespace {

namespace fs = std::filesystem;

class PodmanTargetTest : public ::testing::Test {
protected:
  void SetUp() override
  {
    ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
    image_ = podman_.burner_image();
  }

  Container run_burner(const std::string& name, const std::string& program)
  {
    auto container = podman_.run(name, {}, image_, {"/usr/bin/" + program, "60"});
    // Sampling finds the workload in its loop.
    wait_until_busy(container.pid, program);
    return container;
  }

  PodmanRuntime& podman_ = PodmanRuntime::shared();
  ContainersRemovedAtEnd containers_removed_{podman_};
  std::string image_;
  TempDir dir_;
};

TEST_F(PodmanTargetTest, ByPodmanNameAndShortIdOnlyThatContainer)
{
  auto a = run_burner("pm-a", "burner_a");
  run_burner("pm-b", "burner_b");
  for (const std::string& argument : {std::string("pm-a"), a.id.substr(0, 12)}) {
    std::string out = dir_.path().string() + "/out.folded";
    auto run = run_flamebpf({"--cgroup", argument, "-d", "3", "-o", out});
    ASSERT_EQ(run.exit_code, 0) << argument << "\n" << run.output;
    auto folded = read_folded(out);
    EXPECT_GT(burner_chain_samples(folded, "burner_a", run.output), 100u) << argument;
    EXPECT_EQ(count_with_prefix(folded, "burner_b"), 0u) << argument;
    EXPECT_GE(count_with_prefix(folded, "burner_a;") * 100, total_count(folded) * 90) << argument;
  }
}

TEST_F(PodmanTargetTest, AllContainersWritesOneFilePerPodmanName)
{
  auto a = run_burner("pm-a", "burner_a");
  auto b = run_burner("pm-b", "burner_b");
  std::string out = dir_.path().string() + "/all.folded";
  auto run = run_flamebpf({"--all-containers", "-d", "3", "-o", out});
  ASSERT_EQ(run.exit_code, 0) << run.output;

  // Named after the podman names, not the IDs.
  for (const auto& container : {a, b}) {
    EXPECT_TRUE(fs::exists(dir_.path().string() + "/all." + container.name + ".folded"))
        << run.output;
    EXPECT_FALSE(
        fs::exists(dir_.path().string() + "/all." + container.id.substr(0, 12) + ".folded"))
        << run.output;
  }
  auto a_profile = read_folded(dir_.path().string() + "/all.pm-a.folded");
  auto b_profile = read_folded(dir_.path().string() + "/all.pm-b.folded");
  EXPECT_GT(burner_chain_samples(a_profile, "burner_a", run.output), 50u);
  EXPECT_GT(burner_chain_samples(b_profile, "burner_b", run.output), 50u);
  EXPECT_EQ(count_with_prefix(a_profile, "burner_b;"), 0u) << run.output;
  EXPECT_EQ(count_with_prefix(b_profile, "burner_a;"), 0u) << run.output;
}

} // namespace
} // namespace flamebpf::testing
