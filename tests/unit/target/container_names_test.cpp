#include <filesystem>
#include <gtest/gtest.h>

#include "fake_proc.h"
#include "target/container_names.h"
#include "test_support.h"

namespace flamebpf::target {
namespace {

using flamebpf::testing::cri_annotations;
using flamebpf::testing::FakeProc;
using flamebpf::testing::nul_joined;
using flamebpf::testing::oci_spec;
using flamebpf::testing::read_data;
using flamebpf::testing::TempDir;
using flamebpf::testing::write_file;

constexpr const char* kWeb = "474d492e3c1f0a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7bbeec";
constexpr const char* kOld = "9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b";
constexpr const char* kPodUid = "5f2b1c3d-8e4a-4b6c-9d7e-0a1b2c3d4e5f";

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

TEST(ContainerdCmdline, StateAndConfigInEverySpelling)
{
  auto parsed = parse_containerd_cmdline(
      nul_joined({"/usr/bin/containerd", "--state", "/srv/state", "-c", "/etc/c.toml"}));
  EXPECT_EQ(parsed.state, "/srv/state");
  EXPECT_EQ(parsed.config_file, "/etc/c.toml");
  parsed = parse_containerd_cmdline(
      nul_joined({"containerd", "--state=/x", "--config=/y.toml", "--log-level", "debug"}));
  EXPECT_EQ(parsed.state, "/x");
  EXPECT_EQ(parsed.config_file, "/y.toml");
  parsed = parse_containerd_cmdline(nul_joined({"containerd"}));
  EXPECT_TRUE(parsed.state.empty());
  EXPECT_TRUE(parsed.config_file.empty());
}

TEST(ContainerdConfig, TopLevelStateOnly)
{
  EXPECT_EQ(parse_containerd_config_state("version = 2\nroot = \"/r\"\n  state = \"/s\"\n"), "/s");
  EXPECT_EQ(parse_containerd_config_state("# state = \"/no\"\nstate='/literal'\n"), "/literal");
  // A state key in a table is a plugin's, not containerd's.
  EXPECT_FALSE(parse_containerd_config_state("version = 2\n[plugins.x]\n  state = \"/p\"\n"));
  EXPECT_FALSE(parse_containerd_config_state("stateful = true\nstate = /unquoted\n"));
  EXPECT_FALSE(parse_containerd_config_state(""));
}

TEST(PodAnnotations, ContainerdCriContainerAndSandbox)
{
  auto member = parse_pod_annotations(
      oci_spec(cri_annotations("prod", "shop-7d9f", "web", kPodUid)), PodRuntime::kContainerd);
  ASSERT_TRUE(member.has_value()) << member.error().message;
  ASSERT_TRUE(member->has_value());
  EXPECT_EQ((*member)->namespace_name, "prod");
  EXPECT_EQ((*member)->pod, "shop-7d9f");
  EXPECT_EQ((*member)->container, "web");
  EXPECT_EQ((*member)->pod_uid, kPodUid);
  EXPECT_FALSE((*member)->sandbox);
  EXPECT_EQ(pod_member_name(**member), "prod/shop-7d9f/web");

  auto sandbox = parse_pod_annotations(oci_spec(cri_annotations("prod", "shop-7d9f", "", kPodUid)),
                                       PodRuntime::kContainerd);
  ASSERT_TRUE(sandbox.has_value() && sandbox->has_value());
  EXPECT_TRUE((*sandbox)->sandbox);
  EXPECT_EQ(pod_member_name(**sandbox), "prod/shop-7d9f/POD");
}

TEST(PodAnnotations, CrioContainer)
{
  auto member =
      parse_pod_annotations(oci_spec({{"io.kubernetes.cri-o.ContainerType", "container"},
                                      {"io.kubernetes.pod.namespace", "kube-system"},
                                      {"io.kubernetes.pod.name", "coredns-5d78c9869d-x2x4q"},
                                      {"io.kubernetes.container.name", "coredns"},
                                      {"io.kubernetes.pod.uid", kPodUid}}),
                            PodRuntime::kCrio);
  ASSERT_TRUE(member.has_value() && member->has_value());
  EXPECT_EQ(pod_member_name(**member), "kube-system/coredns-5d78c9869d-x2x4q/coredns");
  EXPECT_FALSE((*member)->sandbox);
}

// A pod's own annotations reach its containers' specs: on CRI-O, a pod that writes containerd's
// keys names no one, nor does one that writes CRI-O's under containerd.
TEST(PodAnnotations, OnlyTheOwningRuntimesKeysCount)
{
  std::map<std::string, std::string> crio_keys = {
      {"io.kubernetes.cri-o.ContainerType", "container"},
      {"io.kubernetes.pod.namespace", "tenant-a"},
      {"io.kubernetes.pod.name", "shop"},
      {"io.kubernetes.container.name", "web"}};
  auto both = cri_annotations("tenant-b", "billing", "db", kPodUid);
  both.insert(crio_keys.begin(), crio_keys.end());
  auto crio = parse_pod_annotations(oci_spec(both), PodRuntime::kCrio);
  ASSERT_TRUE(crio.has_value() && crio->has_value());
  EXPECT_EQ(pod_member_name(**crio), "tenant-a/shop/web");
  auto containerd = parse_pod_annotations(oci_spec(both), PodRuntime::kContainerd);
  ASSERT_TRUE(containerd.has_value() && containerd->has_value());
  EXPECT_EQ(pod_member_name(**containerd), "tenant-b/billing/db");
  auto crio_only = parse_pod_annotations(oci_spec(crio_keys), PodRuntime::kContainerd);
  ASSERT_TRUE(crio_only.has_value());
  EXPECT_FALSE(crio_only->has_value());
}

TEST(PodAnnotations, SpecOfNoPodIsNoPod)
{
  auto member = parse_pod_annotations(oci_spec({{"org.opencontainers.image.title", "x"}}),
                                      PodRuntime::kContainerd);
  ASSERT_TRUE(member.has_value());
  EXPECT_FALSE(member->has_value());
  member = parse_pod_annotations(R"({"ociVersion": "1.0.2"})", PodRuntime::kContainerd);
  ASSERT_TRUE(member.has_value());
  EXPECT_FALSE(member->has_value());
  EXPECT_FALSE(parse_pod_annotations("not json", PodRuntime::kContainerd).has_value());
}

// The values a hostile pod (or whoever runs ctr) could write: none may become a name.
TEST(PodAnnotations, NamesKubernetesWouldRefuseAreRefused)
{
  for (std::string bad :
       {std::string("a/b"), std::string(".."), std::string("a\nb"), std::string(10000, 'a'),
        std::string("<b>x</b>"), std::string("Web"), std::string(""), std::string("-a"),
        std::string("a..b"), std::string("\x1b[2Jx"), std::string("caf\xc3\xa9")}) {
    for (int field = 0; field < 3; ++field) {
      std::string namespace_name = field == 0 ? bad : "prod";
      std::string pod = field == 1 ? bad : "shop";
      std::string container = field == 2 ? bad : "web";
      if (field == 2 && bad.empty())
        continue; // no container name is a sandbox's
      auto member =
          parse_pod_annotations(oci_spec(cri_annotations(namespace_name, pod, container, kPodUid)),
                                PodRuntime::kContainerd);
      ASSERT_FALSE(member.has_value()) << field << " " << bad;
      const std::string& message = member.error().message;
      EXPECT_LT(message.size(), 200u) << message;
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
      EXPECT_EQ(message.find('\x1b'), std::string::npos) << message;
    }
  }
  // Kubernetes' own limits hold: a pod name may have dots and 253 bytes, a namespace 63.
  EXPECT_TRUE(parse_pod_annotations(
                  oci_spec(cri_annotations(std::string(63, 'n'), "a.b-c." + std::string(200, 'p'),
                                           "web", kPodUid)),
                  PodRuntime::kContainerd)
                  .has_value());
  EXPECT_FALSE(
      parse_pod_annotations(oci_spec(cri_annotations(std::string(64, 'n'), "shop", "web", kPodUid)),
                            PodRuntime::kContainerd)
          .has_value());
  EXPECT_FALSE(parse_pod_annotations(oci_spec(cri_annotations("prod", "shop", "web", "../../etc")),
                                     PodRuntime::kContainerd)
                   .has_value());
}

// A sandbox stays a sandbox whatever names it was given: it is never a target, and its refused
// names name nothing.
TEST(PodAnnotations, SandboxWithRefusedNamesIsStillASandbox)
{
  auto member = parse_pod_annotations(oci_spec(cri_annotations("../..", "<b>", "", kPodUid)),
                                      PodRuntime::kContainerd);
  ASSERT_TRUE(member.has_value()) << member.error().message;
  ASSERT_TRUE(member->has_value());
  EXPECT_TRUE((*member)->sandbox);
  EXPECT_EQ((*member)->namespace_name, "");
  EXPECT_EQ((*member)->pod, "");
}

TEST(ContainerNames, PodsFromContainerdsState)
{
  FakeProc proc;
  std::string tasks = proc.add_containerd();
  std::string sandbox(64, '5');
  std::string moby(64, '6');
  write_file(tasks + "/k8s.io/" + kWeb + "/config.json",
             oci_spec(cri_annotations("prod", "shop-7d9f", "web", kPodUid)));
  write_file(tasks + "/k8s.io/" + sandbox + "/config.json",
             oci_spec(cri_annotations("prod", "shop-7d9f", "", kPodUid)));
  // Docker's own containers, in containerd's namespace moby, are named from Docker's state.
  write_file(tasks + "/moby/" + moby + "/config.json", oci_spec({}));

  ContainerNames names(proc.root());
  names.refresh();
  EXPECT_EQ(names.name_of(kWeb), "prod/shop-7d9f/web");
  EXPECT_EQ(names.name_of(sandbox), "prod/shop-7d9f/POD");
  EXPECT_FALSE(names.name_of(moby).has_value());
  const NamedContainer* web = names.find(kWeb);
  ASSERT_NE(web, nullptr);
  ASSERT_TRUE(web->pod.has_value());
  EXPECT_EQ(web->pod->pod_uid, kPodUid);
  EXPECT_FALSE(web->pod->sandbox);
  EXPECT_EQ(web->source, "containerd /run/containerd");
  EXPECT_TRUE(names.find(sandbox)->pod->sandbox);
  EXPECT_EQ(names.all().size(), 2u);
}

TEST(ContainerNames, ContainerdsStateFromItsConfigElseTheDefault)
{
  FakeProc proc;
  std::string configured =
      proc.add_process(400, "containerd", nul_joined({"containerd", "-c", "/etc/k.toml"}));
  write_file(configured + "/etc/k.toml", "version = 2\nstate = \"/var/run/k\"\n");
  write_file(configured + "/var/run/k/io.containerd.runtime.v2.task/k8s.io/" + kWeb +
                 "/config.json",
             oci_spec(cri_annotations("prod", "shop", "web", kPodUid)));
  std::string plain = proc.add_process(401, "containerd", nul_joined({"containerd"}));
  write_file(plain + "/run/containerd/io.containerd.runtime.v2.task/k8s.io/" + kOld +
                 "/config.json",
             oci_spec(cri_annotations("batch", "job-1", "worker", kPodUid)));
  ContainerNames names(proc.root());
  names.refresh();
  EXPECT_EQ(names.name_of(kWeb), "prod/shop/web");
  EXPECT_EQ(names.name_of(kOld), "batch/job-1/worker");
}

TEST(ContainerNames, PodContainerStartedAfterTheRefreshIsReadOnDemand)
{
  FakeProc proc;
  std::string tasks = proc.add_containerd();
  std::filesystem::create_directories(tasks + "/k8s.io");
  ContainerNames names(proc.root());
  names.refresh();
  EXPECT_FALSE(names.name_of(kWeb).has_value());
  write_file(tasks + "/k8s.io/" + kWeb + "/config.json",
             oci_spec(cri_annotations("prod", "shop", "web", kPodUid)));
  EXPECT_EQ(names.name_of(kWeb), "prod/shop/web");
}

TEST(ContainerNames, ForgedAnnotationsNameNoPod)
{
  FakeProc proc;
  std::string tasks = proc.add_containerd();
  write_file(tasks + "/k8s.io/" + kWeb + "/config.json",
             oci_spec(cri_annotations("prod", "../../etc", "web", kPodUid)));
  // A spec that is a link out of containerd's root is not read.
  write_file(proc.root() + "/outside.json", oci_spec(cri_annotations("x", "y", "z", kPodUid)));
  std::filesystem::create_directories(tasks + "/k8s.io/" + kOld);
  std::filesystem::create_symlink(proc.root() + "/outside.json",
                                  tasks + "/k8s.io/" + kOld + "/config.json");
  ContainerNames names(proc.root());
  names.refresh();
  EXPECT_FALSE(names.name_of(kWeb).has_value());
  EXPECT_FALSE(names.name_of(kOld).has_value());
  EXPECT_TRUE(names.all().empty());
}

TEST(ContainerNames, ContainerdOfAnotherPidNamespaceOrUserIsNotTrusted)
{
  FakeProc proc;
  std::string inside = proc.add_process(400, "containerd", nul_joined({"containerd"}), false);
  std::string users = proc.add_process(401, "containerd", nul_joined({"containerd"}), true,
                                       FakeProc::Identity::kUser);
  for (const auto& root : {inside, users})
    write_file(root + "/run/containerd/io.containerd.runtime.v2.task/k8s.io/" + kWeb +
                   "/config.json",
               oci_spec(cri_annotations("prod", "spoofed", "web", kPodUid)));
  ContainerNames names(proc.root());
  names.refresh();
  EXPECT_FALSE(names.name_of(kWeb).has_value());
}

TEST(ContainerNames, CrioBundleNamesThePod)
{
  FakeProc proc;
  std::string bundle =
      "/run/containers/storage/overlay-containers/" + std::string(kWeb) + "/userdata";
  std::string conmon = proc.add_process(
      500, "conmon",
      nul_joined({"/usr/bin/conmon", "-c", kWeb, "-n", "k8s_web_shop_prod_uid_0", "-b", bundle}));
  write_file(conmon + bundle + "/config.json",
             oci_spec({{"io.kubernetes.cri-o.ContainerType", "container"},
                       {"io.kubernetes.pod.namespace", "prod"},
                       {"io.kubernetes.pod.name", "shop"},
                       {"io.kubernetes.container.name", "web"},
                       {"io.kubernetes.pod.uid", kPodUid}}));
  std::string podman_id(64, 'c');
  proc.add_process(501, "conmon",
                   nul_joined({"conmon", "-c", podman_id, "-n", "pod-app", "-b",
                               "/var/lib/containers/x/userdata"}));
  ContainerNames names(proc.root());
  names.refresh();
  EXPECT_EQ(names.name_of(kWeb), "prod/shop/web");
  EXPECT_EQ(names.find(kWeb)->source, "cri-o");
  // podman's bundle has no pod annotations: conmon's name stays.
  EXPECT_EQ(names.name_of(podman_id), "pod-app");
}

} // namespace
} // namespace flamebpf::target
