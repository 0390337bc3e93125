#include <filesystem>
#include <gtest/gtest.h>

#include "fake_proc.h"
#include "target/resolver.h"
#include "test_support.h"

namespace flamebpf::target {
namespace {

using flamebpf::testing::FakeProc;
using flamebpf::testing::read_data;
using flamebpf::testing::TempDir;
using flamebpf::testing::write_file;

constexpr const char* kWeb = "474d492e3c1f0a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7bbeec";
constexpr const char* kPod = "5f2b1c3d-8e4a-4b6c-9d7e-0a1b2c3d4e5f";

// A cgroup tree (plain directories standing in for cgroup2) and a /proc with one dockerd whose
// state names the container kWeb "web".
class ResolverTest : public ::testing::Test {
protected:
  void SetUp() override
  {
    std::string dockerd = proc_.add_process(100, "dockerd", "dockerd");
    write_file(dockerd + "/var/lib/docker/containers/" + kWeb + "/config.v2.json",
               read_data("docker/config.v2.json"));
  }

  std::string proc() const { return proc_.root(); }
  std::string mount() const { return dir_.path().string() + "/cgroup"; }
  void mkdir(const std::string& below) { std::filesystem::create_directories(mount() + below); }

  Result<Target> resolve(const std::string& argument)
  {
    ContainerDirectory directory(mount(), proc());
    directory.refresh();
    return resolve_target(argument, directory);
  }

  TempDir dir_;
  FakeProc proc_;
};

TEST_F(ResolverTest, ContainerByNameFullIdAndPrefix)
{
  mkdir(std::string("/docker/") + kWeb);
  mkdir(std::string("/docker/") + std::string(64, 'b'));
  for (std::string argument : {std::string("web"), std::string(kWeb), std::string("474d"),
                               std::string(kWeb).substr(0, 12), std::string("474D492E")}) {
    auto target = resolve(argument);
    ASSERT_TRUE(target.has_value()) << argument << ": " << target.error().message;
    EXPECT_EQ(target->name, "web") << argument;
    EXPECT_EQ(target->container_id, kWeb);
    EXPECT_EQ(target->labels, (profile::TargetLabels{"web", kWeb, "", ""}));
    EXPECT_EQ(target->cgroup_path, mount() + "/docker/" + kWeb);
    EXPECT_EQ(target->level, 2u);
    EXPECT_NE(target->cgroup_id, 0u);
    EXPECT_EQ(target->argument, argument);
  }
}

TEST_F(ResolverTest, UnnamedContainerIsNamedByShortId)
{
  std::string id = "0123456789abcdef" + std::string(48, '0');
  mkdir("/system.slice/docker-" + id + ".scope");
  auto target = resolve("0123");
  ASSERT_TRUE(target.has_value()) << target.error().message;
  EXPECT_EQ(target->name, "0123456789ab");
  EXPECT_EQ(target->level, 2u);
}

TEST_F(ResolverTest, AmbiguousPrefixListsTheCandidates)
{
  mkdir(std::string("/docker/") + kWeb);
  std::string twin = std::string("474d492e") + std::string(56, 'f');
  mkdir("/docker/" + twin);
  auto target = resolve("474d49");
  ASSERT_FALSE(target.has_value());
  EXPECT_TRUE(target.error().usage);
  const auto& message = target.error().message;
  EXPECT_NE(message.find("ambiguous"), std::string::npos) << message;
  EXPECT_NE(message.find("474d492e3c1f (web)"), std::string::npos) << message;
  EXPECT_NE(message.find("474d492effff"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
}

TEST_F(ResolverTest, UnknownNameSuggestsTheClosest)
{
  mkdir(std::string("/docker/") + kWeb);
  mkdir("/docker/" + std::string(64, 'a'));
  auto target = resolve("wbe");
  ASSERT_FALSE(target.has_value());
  EXPECT_TRUE(target.error().usage);
  const auto& message = target.error().message;
  EXPECT_NE(message.find("unknown cgroup or container wbe"), std::string::npos) << message;
  // The closest first.
  EXPECT_NE(message.find("running containers: web, aaaaaaaaaaaa"), std::string::npos) << message;
}

TEST_F(ResolverTest, TooShortOrNonHexIsNoIdPrefix)
{
  mkdir(std::string("/docker/") + kWeb);
  EXPECT_FALSE(resolve("474").has_value()); // below 4 digits
  EXPECT_FALSE(resolve("474z").has_value());
}

TEST_F(ResolverTest, StoppedContainerIsReportedAsNotRunning)
{
  // Docker knows "web", but no cgroup of it exists.
  mkdir("/docker");
  auto target = resolve("web");
  ASSERT_FALSE(target.has_value());
  EXPECT_NE(target.error().message.find("container web (474d492e3c1f, docker /var/lib/docker) is "
                                        "not running"),
            std::string::npos)
      << target.error().message;
}

TEST_F(ResolverTest, KubernetesPodAndItsContainers)
{
  std::string pod = std::string("/kubepods/burstable/pod") + kPod;
  mkdir(pod + "/" + kWeb);
  mkdir(pod + "/" + std::string(64, '1'));
  auto container = resolve("474d492e3c1f");
  ASSERT_TRUE(container.has_value()) << container.error().message;
  EXPECT_EQ(container->cgroup_path, mount() + pod + "/" + kWeb);
  EXPECT_EQ(container->level, 4u);
  for (std::string argument :
       {std::string(kPod), std::string("pod") + kPod, std::string("5f2b1c")}) {
    auto target = resolve(argument);
    ASSERT_TRUE(target.has_value()) << argument << ": " << target.error().message;
    EXPECT_EQ(target->cgroup_path, mount() + pod);
    EXPECT_EQ(target->name, "pod-5f2b1c3d");
    EXPECT_EQ(target->level, 3u);
    EXPECT_TRUE(target->container_id.empty());
  }
}

TEST_F(ResolverTest, SubCgroupsOfAContainerAreNotSeparateContainers)
{
  mkdir(std::string("/docker/") + kWeb + "/workers/" + std::string(64, '2'));
  ContainerDirectory directory(mount(), proc());
  directory.refresh();
  ASSERT_EQ(directory.inventory().containers.size(), 1u);
  EXPECT_EQ(directory.inventory().containers[0].id, kWeb);
}

TEST_F(ResolverTest, PathThatIsNoCgroup2DirectoryIsRefused)
{
  mkdir("/system.slice");
  auto relative = resolve("system.slice");
  ASSERT_FALSE(relative.has_value());
  EXPECT_NE(relative.error().message.find("is not a cgroup2 directory"), std::string::npos)
      << relative.error().message;
  auto missing = resolve("system.slice/nope.service");
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().message.find("unknown cgroup system.slice/nope.service"),
            std::string::npos)
      << missing.error().message;
}

// A pod of containerd's CRI plugin: its sandbox and two containers, named in containerd's state.
class PodResolverTest : public ResolverTest {
protected:
  void SetUp() override
  {
    ResolverTest::SetUp();
    tasks_ = proc_.add_containerd() + "/k8s.io/";
    start_pod("prod", "shop-7d9f", kPod,
              {{std::string(64, '5'), ""},
               {std::string(64, '6'), "web"},
               {std::string(64, '7'), "sidecar"}});
  }

  void start_pod(const std::string& namespace_name,
                 const std::string& pod,
                 const std::string& uid,
                 const std::vector<std::pair<std::string, std::string>>& containers)
  {
    for (const auto& [id, container] : containers) {
      write_file(tasks_ + id + "/config.json",
                 flamebpf::testing::oci_spec(
                     flamebpf::testing::cri_annotations(namespace_name, pod, container, uid)));
      mkdir("/kubepods/burstable/pod" + uid + "/" + id);
    }
  }

  std::string tasks_;
};

TEST_F(PodResolverTest, PodByNamespaceAndNameIsItsCgroup)
{
  auto target = resolve("prod/shop-7d9f");
  ASSERT_TRUE(target.has_value()) << target.error().message;
  EXPECT_EQ(target->name, "prod/shop-7d9f");
  EXPECT_EQ(target->cgroup_path, mount() + "/kubepods/burstable/pod" + kPod);
  EXPECT_TRUE(target->container_id.empty());
  EXPECT_EQ(target->labels, (profile::TargetLabels{"", "", "prod", "shop-7d9f"}));
  // By UID, the pod is named as by name.
  auto by_uid = resolve(kPod);
  ASSERT_TRUE(by_uid.has_value()) << by_uid.error().message;
  EXPECT_EQ(by_uid->name, "prod/shop-7d9f");
  EXPECT_EQ(by_uid->cgroup_id, target->cgroup_id);
}

TEST_F(PodResolverTest, ContainerOfAPodByItsThreeNames)
{
  auto target = resolve("prod/shop-7d9f/web");
  ASSERT_TRUE(target.has_value()) << target.error().message;
  EXPECT_EQ(target->name, "prod/shop-7d9f/web");
  EXPECT_EQ(target->container_id, std::string(64, '6'));
  EXPECT_EQ(target->labels,
            (profile::TargetLabels{"web", std::string(64, '6'), "prod", "shop-7d9f"}));
  EXPECT_EQ(target->cgroup_path,
            mount() + "/kubepods/burstable/pod" + kPod + "/" + std::string(64, '6'));
}

TEST_F(PodResolverTest, UnknownPodListsTheClosestPods)
{
  start_pod("prod", "cart-5c4b", "0a0b0c0d-1111-2222-3333-444455556666",
            {{std::string(64, '8'), "web"}});
  for (std::string argument : {"prod/shop-7d9e", "prod/shop-7d9f/webb", "staging/shop-7d9f"}) {
    auto target = resolve(argument);
    ASSERT_FALSE(target.has_value()) << argument;
    EXPECT_TRUE(target.error().usage);
    const auto& message = target.error().message;
    EXPECT_NE(message.find("running pods: prod/shop-7d9f, prod/cart-5c4b"), std::string::npos)
        << message;
  }
}

TEST_F(PodResolverTest, TwoPodsOfOneNameAreAmbiguous)
{
  start_pod("prod", "shop-7d9f", "0a0b0c0d-1111-2222-3333-444455556666",
            {{std::string(64, '8'), "web"}});
  auto target = resolve("prod/shop-7d9f");
  ASSERT_FALSE(target.has_value());
  EXPECT_TRUE(target.error().usage);
  EXPECT_NE(target.error().message.find(kPod), std::string::npos) << target.error().message;
}

TEST(EditDistance, Basics)
{
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("web", "web"), 0u);
  EXPECT_EQ(edit_distance("wbe", "web"), 2u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
}

} // namespace
} // namespace flamebpf::target
