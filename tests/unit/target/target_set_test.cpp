#include <filesystem>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fake_proc.h"
#include "target/target_set.h"
#include "test_support.h"

namespace flamebpf::target {
namespace {

using flamebpf::testing::FakeProc;
using flamebpf::testing::read_data;
using flamebpf::testing::TempDir;
using flamebpf::testing::write_file;

constexpr const char* kWeb = "474d492e3c1f0a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7bbeec";

// A plain directory tree standing in for the cgroup2 hierarchy, and a /proc with one dockerd.
class TargetSetTest : public ::testing::Test {
protected:
  void SetUp() override
  {
    std::string dockerd = proc_.add_process(100, "dockerd", "dockerd");
    std::filesystem::create_directories(mount() + "/docker");
  }

  std::string proc() const { return proc_.root(); }
  std::string mount() const { return dir_.path().string() + "/cgroup"; }

  // Starts a container as Docker would: its state, then its cgroup.
  void start(const std::string& id, const std::string& name)
  {
    std::string config = read_data("docker/config.v2.json");
    for (size_t at = config.find(kWeb); at != std::string::npos; at = config.find(kWeb, at + 64))
      config.replace(at, 64, id);
    config.replace(config.find("\"Name\":\"/web\""), 13, "\"Name\":\"/" + name + "\"");
    write_file(proc() + "/100/root/var/lib/docker/containers/" + id + "/config.v2.json", config);
    std::filesystem::create_directories(mount() + "/docker/" + id);
  }
  void stop(const std::string& id) { std::filesystem::remove(mount() + "/docker/" + id); }

  Result<TargetSet> create(TargetOptions options)
  {
    return TargetSet::create(options, ContainerDirectory(mount(), proc()), proc());
  }

  static std::vector<std::string> names_of(const std::vector<Target>& targets)
  {
    std::vector<std::string> names;
    for (const auto& target : targets)
      names.push_back(target.name);
    std::sort(names.begin(), names.end());
    return names;
  }

  TempDir dir_;
  FakeProc proc_;
};

TEST_F(TargetSetTest, AllContainersFollowsStartsAndStops)
{
  std::string db(64, 'd');
  start(kWeb, "web");
  TargetOptions options;
  options.all_containers = true;
  auto set = create(options);
  ASSERT_TRUE(set.has_value()) << set.error().message;
  EXPECT_EQ(names_of(set->live()), std::vector<std::string>{"web"});
  EXPECT_TRUE(set->keeps_unmatched());
  EXPECT_TRUE(set->per_target_output());
  EXPECT_TRUE(set->follows_changes());

  start(db, "db");
  auto changes = set->refresh();
  EXPECT_EQ(names_of(changes.added), std::vector<std::string>{"db"});
  EXPECT_TRUE(changes.removed.empty());
  EXPECT_EQ(names_of(set->live()), (std::vector<std::string>{"db", "web"}));

  uint64_t web_id = 0;
  for (const auto& target : set->live())
    web_id = target.name == "web" ? target.cgroup_id : web_id;
  size_t mark_before_drop = set->dropped_mark();
  stop(kWeb);
  changes = set->refresh();
  EXPECT_EQ(names_of(changes.removed), std::vector<std::string>{"web"});
  EXPECT_EQ(names_of(set->live()), std::vector<std::string>{"db"});
  // Its samples still in the kernel's buffers are named until a drain that began after the drop.
  EXPECT_EQ(set->names().by_cgroup.at(web_id), "web");
  set->forget_dropped(mark_before_drop);
  EXPECT_EQ(set->names().by_cgroup.at(web_id), "web");
  size_t mark_after_drop = set->dropped_mark();
  EXPECT_EQ(mark_after_drop, mark_before_drop + 1);
  set->forget_dropped(mark_after_drop);
  EXPECT_FALSE(set->names().by_cgroup.contains(web_id));
  EXPECT_EQ(set->dropped_mark(), mark_after_drop);
  EXPECT_TRUE(set->refresh().empty());
}

TEST_F(TargetSetTest, ContainersOnlyDropsTheHost)
{
  TargetOptions options;
  options.all_containers = true;
  options.containers_only = true;
  auto set = create(options);
  ASSERT_TRUE(set.has_value());
  EXPECT_TRUE(set->live().empty());
  EXPECT_FALSE(set->keeps_unmatched());
}

TEST_F(TargetSetTest, NamedContainerIsFollowedAcrossARestartWithANewId)
{
  std::string second(64, '7');
  start(kWeb, "web");
  TargetOptions options;
  options.cgroups = {"web"};
  auto set = create(options);
  ASSERT_TRUE(set.has_value()) << set.error().message;
  EXPECT_FALSE(set->per_target_output());
  EXPECT_FALSE(set->keeps_unmatched());
  EXPECT_FALSE(set->follows_changes());

  // docker rm -f web; docker run --name web …: the state of the old one is gone.
  stop(kWeb);
  std::filesystem::remove_all(proc() + "/100/root/var/lib/docker/containers/" + kWeb);
  auto changes = set->refresh();
  ASSERT_EQ(changes.removed.size(), 1u);
  EXPECT_TRUE(set->live().empty());
  EXPECT_TRUE(set->follows_changes());
  EXPECT_TRUE(set->refresh().empty()); // still stopped

  start(second, "web");
  changes = set->refresh();
  ASSERT_EQ(changes.added.size(), 1u);
  EXPECT_EQ(changes.added[0].name, "web");
  EXPECT_EQ(changes.added[0].container_id, second);
  EXPECT_FALSE(set->follows_changes());
}

TEST_F(TargetSetTest, UnknownTargetIsAUsageError)
{
  TargetOptions options;
  options.cgroups = {"nope"};
  auto set = create(options);
  ASSERT_FALSE(set.has_value());
  EXPECT_TRUE(set.error().usage);
}

TEST_F(TargetSetTest, SameContainerTwiceIsOneTarget)
{
  start(kWeb, "web");
  TargetOptions options;
  options.cgroups = {"web", "474d492e3c1f"};
  options.all_containers = true;
  auto set = create(options);
  ASSERT_TRUE(set.has_value());
  EXPECT_EQ(set->live().size(), 1u);
}

TEST_F(TargetSetTest, NamesNeverCollide)
{
  // A container named "host" would merge with the samples outside containers.
  start(kWeb, "host");
  TargetOptions options;
  options.all_containers = true;
  auto set = create(options);
  ASSERT_TRUE(set.has_value());
  ASSERT_EQ(set->live().size(), 1u);
  EXPECT_EQ(set->live()[0].name, "host-474d492e3c1f");
}

TEST_F(TargetSetTest, ProcessTargetIsDroppedWhenItExits)
{
  std::string pid = "4242";
  write_file(proc() + "/" + pid + "/status", "Name:\tburner\nTgid:\t4242\nPid:\t4242\n");
  write_file(proc() + "/" + pid + "/comm", "burner\n");
  TargetOptions options;
  options.pids = {4242};
  auto set = create(options);
  ASSERT_TRUE(set.has_value()) << set.error().message;
  ASSERT_EQ(set->live().size(), 1u);
  EXPECT_EQ(set->live()[0].name, "burner-4242");
  EXPECT_EQ(set->names().by_pid.at(4242), "burner-4242");
  std::filesystem::remove_all(proc() + "/" + pid);
  auto changes = set->refresh();
  ASSERT_EQ(changes.removed.size(), 1u);
  EXPECT_EQ(changes.removed[0].pid, 4242u);
  EXPECT_TRUE(set->live().empty());
}

TEST_F(TargetSetTest, ProcessTargetStaysWhileFlamebpfIsOutOfDescriptors)
{
  std::string pid = "4242";
  write_file(proc() + "/" + pid + "/status", "Name:\tburner\nTgid:\t4242\nPid:\t4242\n");
  write_file(proc() + "/" + pid + "/comm", "burner\n");
  TargetOptions options;
  options.pids = {4242};
  auto set = create(options);
  ASSERT_TRUE(set.has_value()) << set.error().message;
  // No descriptor can be opened now: every open fails with EMFILE, as when a host's many ELF
  // files had used them all.
  int next_free = ::dup(0);
  ASSERT_GE(next_free, 0);
  ::close(next_free);
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit none = saved;
  none.rlim_cur = static_cast<rlim_t>(next_free);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &none), 0);
  auto changes = set->refresh();
  ::setrlimit(RLIMIT_NOFILE, &saved);
  EXPECT_TRUE(changes.removed.empty());
  EXPECT_EQ(set->live().size(), 1u);
}

// containerd's CRI plugin: a pod's sandbox and container, their specs, then their cgroups.
void start_pod_container(const FakeProc& proc,
                         const std::string& mount,
                         const std::string& pod,
                         const std::string& uid,
                         const std::string& id,
                         const std::string& container)
{
  write_file(
      proc.root() + "/400/root/run/containerd/io.containerd.runtime.v2.task/k8s.io/" + id +
          "/config.json",
      flamebpf::testing::oci_spec(flamebpf::testing::cri_annotations("prod", pod, container, uid)));
  std::filesystem::create_directories(mount + "/kubepods/pod" + uid + "/" + id);
}

TEST_F(TargetSetTest, AllContainersLeavesPodSandboxesOut)
{
  proc_.add_containerd();
  std::string uid = "5f2b1c3d-8e4a-4b6c-9d7e-0a1b2c3d4e5f";
  start_pod_container(proc_, mount(), "shop", uid, std::string(64, '5'), "");
  start_pod_container(proc_, mount(), "shop", uid, std::string(64, '6'), "web");
  TargetOptions options;
  options.all_containers = true;
  options.containers_only = true;
  auto set = create(options);
  ASSERT_TRUE(set.has_value()) << set.error().message;
  EXPECT_EQ(names_of(set->live()), std::vector<std::string>{"prod/shop/web"});
  EXPECT_EQ(set->labels(), (std::map<std::string, profile::TargetLabels>{
                               {"prod/shop/web", {"web", std::string(64, '6'), "prod", "shop"}}}));
  start_pod_container(proc_, mount(), "shop", uid, std::string(64, '7'), "sidecar");
  auto changes = set->refresh();
  ASSERT_EQ(changes.added.size(), 1u);
  EXPECT_EQ(changes.added[0].name, "prod/shop/sidecar");
  // Nor is a sandbox whose names Kubernetes would refuse.
  start_pod_container(proc_, mount(), "../../etc", "0a0b0c0d-1111-2222-3333-444455556666",
                      std::string(64, '8'), "");
  changes = set->refresh();
  EXPECT_TRUE(changes.added.empty()) << changes.added[0].name;
}

// A pod selected by name is one target; its samples are labelled with the container they are
// from, found again as containers start.
TEST_F(TargetSetTest, PodTargetKnowsItsContainersAsTheyCome)
{
  proc_.add_containerd();
  std::string uid = "5f2b1c3d-8e4a-4b6c-9d7e-0a1b2c3d4e5f";
  start_pod_container(proc_, mount(), "shop", uid, std::string(64, '5'), "");
  start_pod_container(proc_, mount(), "shop", uid, std::string(64, '6'), "web");
  TargetOptions options;
  options.cgroups = {"prod/shop"};
  auto set = create(options);
  ASSERT_TRUE(set.has_value()) << set.error().message;
  EXPECT_TRUE(set->follows_changes());
  EXPECT_EQ(set->pod_container_labels(),
            (std::map<std::string, profile::TargetLabels>{
                {std::string(64, '6'), {"web", std::string(64, '6'), "prod", "shop"}}}));
  std::string pod = "/kubepods/pod" + uid;
  EXPECT_EQ(set->names().pod_containers_by_cgroup_path,
            (std::vector<std::pair<std::string, std::string>>{
                {pod + "/" + std::string(64, '6'), std::string(64, '6')}}));

  start_pod_container(proc_, mount(), "shop", uid, std::string(64, '7'), "sidecar");
  auto changes = set->refresh();
  EXPECT_TRUE(changes.empty());
  EXPECT_EQ(set->pod_container_labels().size(), 2u);
  EXPECT_EQ(set->pod_container_labels()[std::string(64, '7')].container, "sidecar");
}

// A StatefulSet's pod is deleted and made again under its name, with a new UID.
TEST_F(TargetSetTest, PodRecreatedWithANewUidIsFollowed)
{
  proc_.add_containerd();
  std::string first_uid = "5f2b1c3d-8e4a-4b6c-9d7e-0a1b2c3d4e5f";
  std::string second_uid = "0a0b0c0d-1111-2222-3333-444455556666";
  start_pod_container(proc_, mount(), "db-0", first_uid, std::string(64, '5'), "");
  start_pod_container(proc_, mount(), "db-0", first_uid, std::string(64, '6'), "postgres");
  TargetOptions options;
  options.cgroups = {"prod/db-0"};
  auto set = create(options);
  ASSERT_TRUE(set.has_value()) << set.error().message;
  ASSERT_EQ(set->live().size(), 1u);
  EXPECT_EQ(set->live()[0].name, "prod/db-0");
  EXPECT_EQ(set->live()[0].cgroup_path, mount() + "/kubepods/pod" + first_uid);

  std::filesystem::remove_all(mount() + "/kubepods/pod" + first_uid);
  std::filesystem::remove_all(proc_.root() +
                              "/400/root/run/containerd/io.containerd.runtime.v2.task/k8s.io");
  auto changes = set->refresh();
  ASSERT_EQ(changes.removed.size(), 1u);
  EXPECT_TRUE(set->live().empty());

  start_pod_container(proc_, mount(), "db-0", second_uid, std::string(64, '7'), "");
  start_pod_container(proc_, mount(), "db-0", second_uid, std::string(64, '8'), "postgres");
  changes = set->refresh();
  ASSERT_EQ(changes.added.size(), 1u);
  EXPECT_EQ(changes.added[0].name, "prod/db-0");
  EXPECT_EQ(changes.added[0].cgroup_path, mount() + "/kubepods/pod" + second_uid);
}

} // namespace
} // namespace flamebpf::target
