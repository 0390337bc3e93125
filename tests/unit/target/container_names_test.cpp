#include <filesystem>
#include <gtest/gtest.h>

#include "fake_proc.h"
#include "target/container_names.h"
#include "test_support.h"

namespace flamebpf::target {
namespace {

using flamebpf::testing::FakeProc;
using flamebpf::testing::nul_joined;
using flamebpf::testing::read_data;
using flamebpf::testing::TempDir;
using flamebpf::testing::write_file;

constexpr const char* kWeb = "474d492e3c1f0a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7bbeec";
constexpr const char* kOld = "9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b";

TEST(DockerdCmdline, DataRootAndConfigFileInEverySpelling)
{
  auto spaced = parse_dockerd_cmdline(
      nul_joined({"/usr/sbin/dockerd", "--data-root", "/srv/d", "-H", "unix:///run/d.sock"}));
  EXPECT_EQ(spaced.data_root, "/srv/d");
  EXPECT_EQ(spaced.config_file, "");
  auto joined = parse_dockerd_cmdline(
      nul_joined({"dockerd", "--data-root=/srv/e", "--config-file=/etc/d.json"}));
  EXPECT_EQ(joined.data_root, "/srv/e");
  EXPECT_EQ(joined.config_file, "/etc/d.json");
  EXPECT_EQ(parse_dockerd_cmdline(nul_joined({"dockerd", "-g", "/old"})).data_root, "/old");
  // An option at the end without its value is ignored.
  EXPECT_EQ(parse_dockerd_cmdline(nul_joined({"dockerd", "--data-root"})).data_root, "");
}

TEST(DaemonJson, DataRoot)
{
  EXPECT_EQ(parse_daemon_json_data_root(R"({"data-root": "/mnt/docker", "debug": true})"),
            "/mnt/docker");
  EXPECT_EQ(parse_daemon_json_data_root(R"({"graph": "/old-style"})"), "/old-style");
  EXPECT_FALSE(parse_daemon_json_data_root(R"({"debug": true})").has_value());
  EXPECT_FALSE(parse_daemon_json_data_root("{not json").has_value());
  EXPECT_FALSE(parse_daemon_json_data_root(R"({"data-root": 7})").has_value());
}

TEST(DockerConfig, NameIdAndState)
{
  auto config = parse_docker_config(read_data("docker/config.v2.json"));
  ASSERT_TRUE(config.has_value());
  EXPECT_EQ(config->id, kWeb);
  EXPECT_EQ(config->name, "web"); // Docker's leading '/' removed; labels are not the name
  EXPECT_TRUE(config->running);
  auto stopped = parse_docker_config(read_data("docker/config.stopped.v2.json"));
  ASSERT_TRUE(stopped.has_value());
  EXPECT_EQ(stopped->name, "old-batch");
  EXPECT_FALSE(stopped->running);
}

TEST(DockerConfig, RejectsWhatIsNoContainer)
{
  EXPECT_FALSE(parse_docker_config("").has_value());
  EXPECT_FALSE(parse_docker_config("[1,2]").has_value());
  EXPECT_FALSE(parse_docker_config(R"({"ID": "abc", "Name": "/x"})").has_value());
  EXPECT_FALSE(parse_docker_config(std::string(R"({"ID": ")") + kWeb + R"(", "Name": 3})"));
  EXPECT_FALSE(parse_docker_config(std::string(R"({"ID": ")") + kWeb + R"(", "Name": "/x")"));
}

TEST(ConmonCmdline, IdAndName)
{
  auto parsed = parse_conmon_cmdline(nul_joined(
      {"/usr/bin/conmon", "--api-version", "1", "-c", kWeb, "-u", kWeb, "-r", "/usr/bin/runc", "-b",
       "/var/lib/containers/storage/overlay-containers/x/userdata", "-n", "jvm-app"}));
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->id, kWeb);
  EXPECT_EQ(parsed->name, "jvm-app");
  auto long_form =
      parse_conmon_cmdline(nul_joined({"conmon", std::string("--cid=") + kWeb, "--name=k8s_app"}));
  ASSERT_TRUE(long_form.has_value());
  EXPECT_EQ(long_form->name, "k8s_app");
  EXPECT_FALSE(parse_conmon_cmdline(nul_joined({"conmon", "-c", "short", "-n", "x"})));
  EXPECT_FALSE(parse_conmon_cmdline(nul_joined({"conmon", "-c", kWeb})));
}

TEST(ContainerNames, FromDockerDataRootsAndConmon)
{
  FakeProc proc;
  auto dockerd = proc.add_process(100, "dockerd",
                                  nul_joined({"/usr/sbin/dockerd", "--data-root", "/srv/docker"}));
  write_file(dockerd + "/srv/docker/containers/" + kWeb + "/config.v2.json",
             read_data("docker/config.v2.json"));
  write_file(dockerd + "/srv/docker/containers/" + kOld + "/config.v2.json",
             read_data("docker/config.stopped.v2.json"));
  std::string podman_id(64, 'c');
  proc.add_process(200, "conmon", nul_joined({"conmon", "-c", podman_id, "-n", "pod-app"}));
  proc.add_process(300, "bash", nul_joined({"bash"}));

  ContainerNames names(proc.root());
  names.refresh();
  EXPECT_EQ(names.name_of(kWeb), "web");
  EXPECT_EQ(names.name_of(kOld), "old-batch");
  EXPECT_EQ(names.name_of(podman_id), "pod-app");
  EXPECT_FALSE(names.name_of(std::string(64, 'd')).has_value());
  EXPECT_EQ(names.all().size(), 3u);
  ASSERT_EQ(names.docker_data_roots().size(), 1u);
  EXPECT_EQ(names.docker_data_roots()[0], dockerd + "/srv/docker");
}

TEST(ContainerNames, DataRootFromDaemonJsonElseTheDefault)
{
  FakeProc proc;
  auto configured = proc.add_process(100, "dockerd", nul_joined({"dockerd"}));
  write_file(configured + "/etc/docker/daemon.json", R"({"data-root": "/data/docker"})");
  write_file(configured + "/data/docker/containers/" + kWeb + "/config.v2.json",
             read_data("docker/config.v2.json"));
  auto plain = proc.add_process(101, "dockerd", nul_joined({"dockerd", "-H", "fd://"}));
  write_file(plain + "/var/lib/docker/containers/" + kOld + "/config.v2.json",
             read_data("docker/config.stopped.v2.json"));

  ContainerNames names(proc.root());
  names.refresh();
  EXPECT_EQ(names.name_of(kWeb), "web");
  EXPECT_EQ(names.name_of(kOld), "old-batch");
}

TEST(ContainerNames, ContainerStartedAfterTheRefreshIsReadOnDemand)
{
  FakeProc proc;
  auto dockerd = proc.add_process(100, "dockerd", nul_joined({"dockerd"}));
  ContainerNames names(proc.root());
  names.refresh();
  EXPECT_FALSE(names.name_of(kWeb).has_value());
  write_file(dockerd + "/var/lib/docker/containers/" + kWeb + "/config.v2.json",
             read_data("docker/config.v2.json"));
  EXPECT_EQ(names.name_of(kWeb), "web");
}

TEST(ContainerNames, ProcessesOfOtherPidNamespacesAreNotTrusted)
{
  FakeProc proc;
  // A process inside a container calling itself dockerd and conmon, to rename a container.
  auto impostor = proc.add_process(100, "dockerd", nul_joined({"dockerd"}), false);
  write_file(impostor + "/var/lib/docker/containers/" + kWeb + "/config.v2.json",
             read_data("docker/config.v2.json"));
  proc.add_process(101, "conmon", nul_joined({"conmon", "-c", kOld, "-n", "spoofed"}), false);
  ContainerNames names(proc.root());
  names.refresh();
  EXPECT_TRUE(names.all().empty());
  EXPECT_FALSE(names.name_of(kWeb).has_value());
  EXPECT_FALSE(names.name_of(kOld).has_value());
}

TEST(ContainerNames, ConfigWithAnotherIdOrSymlinkOutOfTheRootIsIgnored)
{
  FakeProc proc;
  auto dockerd = proc.add_process(100, "dockerd", nul_joined({"dockerd"}));
  // The file of kOld claims to be kWeb.
  write_file(dockerd + "/var/lib/docker/containers/" + kOld + "/config.v2.json",
             read_data("docker/config.v2.json"));
  // An absolute symlink resolves inside the process's root, not flamebpf's.
  std::string escape = dockerd + "/var/lib/docker/containers/" + std::string(64, 'e');
  std::filesystem::create_directories(escape);
  std::filesystem::create_symlink(flamebpf::testing::data_path("docker/config.v2.json"),
                                  escape + "/config.v2.json");
  ContainerNames names(proc.root());
  names.refresh();
  EXPECT_TRUE(names.all().empty());
}

TEST(ContainerNames, OnlyRootsRuntimesFromRootsProgramsAreTrusted)
{
  FakeProc proc;
  // Any user may run a program named dockerd or conmon in the host's PID namespace.
  auto users =
      proc.add_process(100, "dockerd", nul_joined({"dockerd"}), true, FakeProc::Identity::kUser);
  write_file(users + "/var/lib/docker/containers/" + kWeb + "/config.v2.json",
             read_data("docker/config.v2.json"));
  proc.add_process(101, "conmon", nul_joined({"conmon", "-c", kOld, "-n", "payments-db"}), true,
                   FakeProc::Identity::kUser);
  // Root running a program someone else could have replaced.
  auto writable = proc.add_process(102, "dockerd", nul_joined({"dockerd"}), true,
                                   FakeProc::Identity::kRootWritableProgram);
  write_file(writable + "/var/lib/docker/containers/" + kWeb + "/config.v2.json",
             read_data("docker/config.v2.json"));
  ContainerNames names(proc.root());
  names.refresh();
  EXPECT_TRUE(names.all().empty());
  EXPECT_FALSE(names.name_of(kWeb).has_value());
  EXPECT_FALSE(names.name_of(kOld).has_value());
  EXPECT_TRUE(names.docker_data_roots().empty());
}

} // namespace
} // namespace flamebpf::target
