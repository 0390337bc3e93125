// flamebpf's container image, built by scripts/build-image as a user builds it (no registry: its
// Debian base made with mmdebstrap), and run by a real dockerd the way deploy/kubernetes runs it:
// the host's PID namespace, the DaemonSet's arguments, capabilities and seccomp profile and no
// others, a read-only root, the host's cgroups mounted read-only, and cgroup and UTS namespaces of
// its own, as a pod has them on a cgroup v2 node. It must profile another container on the host by
// its name.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <regex>
#include <string>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <vector>

#include "container_harness.h"
#include "harness.h"
#include "pprof_tool.h"
#include "process.h"

namespace flamebpf::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kManifest = FLAMEBPF_SOURCE_DIR "/deploy/kubernetes/flamebpf.yaml";
constexpr const char* kImageTag = "flamebpf:image-test";
constexpr const char* kDumpsInContainer = "/var/lib/flamebpf";

// The items of the YAML list that follows the first line ending in `key:` after the line
// containing `after`: the DaemonSet's container args or added capabilities.
std::vector<std::string> manifest_list(const std::string& after, const std::string& key)
{
  std::ifstream manifest(kManifest);
  std::vector<std::string> items;
  bool seen_after = false;
  bool in_list = false;
  static const std::regex item(R"(^\s*- (\S+)\s*$)");
  for (std::string line; std::getline(manifest, line);) {
    if (!seen_after) {
      seen_after = line.find(after) != std::string::npos;
      continue;
    }
    std::smatch match;
    if (in_list) {
      if (!std::regex_match(line, match, item))
        break;
      items.push_back(match[1]);
    } else if (line.ends_with(key + ":")) {
      in_list = true;
    }
  }
  return items;
}

// The value of the first line `key: value` after the line containing `after`.
std::string manifest_value(const std::string& after, const std::string& key)
{
  std::ifstream manifest(kManifest);
  const std::regex line_of_key("^\\s*" + key + ":\\s*(\\S+)\\s*$");
  bool seen_after = false;
  std::smatch match;
  for (std::string line; std::getline(manifest, line);) {
    if (!seen_after)
      seen_after = line.find(after) != std::string::npos;
    else if (std::regex_match(line, match, line_of_key))
      return match[1];
  }
  return "";
}

class FlamebpfImageTest : public ::testing::Test {
protected:
  void SetUp() override { ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root"; }
  // The daemon removes the images it made; the ones scripts/build-image made go first, the base
  // (which the daemon cannot remove while an image is built on it) last.
  void TearDown() override { docker({"rmi", "-f", kImageTag, "debian:12-slim"}); }

  // The docker client against the test's daemon, as a user runs it: its output, both streams.
  ProcessOutput docker(const std::vector<std::string>& args,
                       std::chrono::steady_clock::duration timeout = 60s)
  {
    std::vector<std::string> argv{"/usr/bin/docker"};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_process(argv, {.environment = environment()}, timeout);
  }

  std::vector<std::string> environment() const
  {
    return {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + daemon_.work_dir(),
            "DOCKER_HOST=unix://" + daemon_.socket(),
            "DOCKER_CONFIG=" + daemon_.work_dir() + "/client"};
  }

  // `docker run` options for what the DaemonSet's pod is: the host's PID namespace, cgroup and
  // UTS namespaces of its own, its capabilities and no others, its seccomp profile (the node's
  // copy of deploy/seccomp/<its localhostProfile>), a read-only root and the host's cgroups.
  std::vector<std::string> daemon_set_shape()
  {
    auto capabilities = manifest_list("securityContext:", "add");
    EXPECT_GE(capabilities.size(), 4u) << "no capabilities found in " << kManifest;
    std::vector<std::string> shape{"--pid=host",
                                   "--cgroupns=private",
                                   "--network=none",
                                   "--read-only",
                                   "--cap-drop=ALL",
                                   "-v",
                                   "/sys/fs/cgroup:/sys/fs/cgroup:ro"};
    for (const auto& capability : capabilities)
      shape.push_back("--cap-add=" + capability);
    std::string profile = manifest_value("seccompProfile:", "localhostProfile");
    EXPECT_EQ(manifest_value("seccompProfile:", "type"), "Localhost")
        << "the DaemonSet's seccomp profile is not a Localhost one";
    EXPECT_FALSE(profile.empty()) << "no localhostProfile in " << kManifest;
    // scripts/seccomp-profile records flamebpf's calls with none of its own profile
    // (FLAMEBPF_SECCOMP=off): Docker's default one then, under which runc's steps before
    // flamebpf's exec are recorded as well.
    const char* mode = std::getenv("FLAMEBPF_SECCOMP");
    if (mode == nullptr || std::string(mode).empty() || std::string(mode) == "enforce")
      shape.push_back(std::string("--security-opt=seccomp=") + FLAMEBPF_SOURCE_DIR +
                      "/deploy/seccomp/" + profile);
    else
      std::printf("[ SECCOMP  ] FLAMEBPF_SECCOMP=%s: Docker's default profile, not %s\n", mode,
                  profile.c_str());
    return shape;
  }

  DockerDaemon daemon_;
  TempDir dumps_{"/var/tmp"};
};

TEST_F(FlamebpfImageTest, DaemonSetsShapeProfilesAnotherContainerByName)
{
  // Busy until the daemon removes it: the image's build may take minutes.
  auto burner = daemon_.run("flamebpf-image-burner", {}, daemon_.burner_image(),
                            {"/usr/bin/burner_a", "900"});
  wait_until_busy(burner.pid, "burner_a");

  // As a user builds it, from this build tree rather than a second build of flamebpf.
  auto built = run_process({FLAMEBPF_SOURCE_DIR "/scripts/build-image", "--build-dir",
                            FLAMEBPF_BUILD_DIR, "--tag", kImageTag},
                           {.environment = environment()}, 10min);
  ASSERT_EQ(built.status, 0) << built.err;
  EXPECT_NE(built.out.find(kImageTag), std::string::npos) << built.out;

  auto args = manifest_list("image:", "args");
  ASSERT_NE(std::find(args.begin(), args.end(), "--interval=60"), args.end())
      << "the DaemonSet's args changed: " << kManifest;
  // Its dumps every 2 s instead of every minute, to see three in a short test.
  std::replace(args.begin(), args.end(), std::string("--interval=60"), std::string("--interval=2"));
  std::vector<std::string> run{"run", "-d", "--name", "flamebpf-agent"};
  auto shape = daemon_set_shape();
  run.insert(run.end(), shape.begin(), shape.end());
  run.insert(run.end(), {"-v", dumps_.path().string() + ":" + kDumpsInContainer, kImageTag});
  run.insert(run.end(), args.begin(), args.end());
  auto started = docker(run);
  ASSERT_EQ(started.status, 0) << started.err;
  // Under one filter, the profile's.
  auto agent = docker({"inspect", "-f", "{{.State.Pid}}", "flamebpf-agent"});
  std::string status = read_text("/proc/" + agent.out.substr(0, agent.out.find('\n')) + "/status");
  EXPECT_NE(status.find("Seccomp:\t2\n"), std::string::npos) << status;
  EXPECT_NE(status.find("Seccomp_filters:\t1\n"), std::string::npos) << status;
  std::string burner_dir = dumps_.path().string() + "/flamebpf-image-burner";
  bool dumped = wait_for_text(dumps_.path().string() + "/flamebpf-stats.jsonl",
                              "flamebpf-image-burner", 30) &&
                poll_until([&] { return fs::exists(burner_dir + "/latest.pb.gz"); }, 10s);
  std::this_thread::sleep_for(4s);
  auto stopped = docker({"stop", "-t", "20", "flamebpf-agent"});
  auto logs = docker({"logs", "flamebpf-agent"});
  std::string log = logs.out + logs.err;
  auto exit_status = docker({"inspect", "-f", "{{.State.ExitCode}}", "flamebpf-agent"});
  ASSERT_TRUE(dumped) << "no dump of the burner's container in 40 s:\n" << log;
  EXPECT_EQ(stopped.status, 0) << stopped.err;
  EXPECT_EQ(exit_status.out, "0\n") << log;
  EXPECT_EQ(log.find("error"), std::string::npos) << log;

  // The other container, by its name, with whole stacks, in every window.
  std::map<std::string, uint64_t> folded;
  for (const auto& window : fs::directory_iterator(burner_dir)) {
    if (window.is_symlink() || window.path().extension() != ".folded")
      continue;
    for (const auto& [stack, count] : read_folded(window.path().string()))
      folded[stack] += count;
  }
  EXPECT_GT(burner_chain_samples(folded, "burner_a", log), 200u) << hottest_stacks(folded);
  // Named from the host's cgroup namespace: a private one would have read its path as
  // /../docker/<id>, and the container would have had no name.
  EXPECT_EQ(count_with_prefix(folded, "burner_a;"), total_count(folded)) << hottest_stacks(folded);
  // Labelled with the node's name, not the name of flamebpf's own container.
  std::string go = find_go();
  ASSERT_FALSE(go.empty()) << "go (golang-go) is needed to read pprof";
  struct utsname host {};
  ASSERT_EQ(::uname(&host), 0);
  TempDir scratch{"/var/tmp"};
  PprofTool pprof(go, scratch.path().string());
  std::string tags = pprof.run({"-tags"}, burner_dir + "/latest.pb.gz");
  EXPECT_NE(tags.find(std::string("): ") + host.nodename + "\n"), std::string::npos) << tags;
  EXPECT_NE(tags.find("): flamebpf-image-burner\n"), std::string::npos) << tags;

  // The same image for one recording. (`--privileged` would do on a host; root here lacks
  // capabilities, CAP_SYS_RESOURCE among them, that it grants.)
  std::vector<std::string> record{"run", "--rm"};
  record.insert(record.end(), shape.begin(), shape.end());
  record.insert(record.end(), {"-v", dumps_.path().string() + ":/out", kImageTag, "--cgroup",
                               "flamebpf-image-burner", "-d", "3", "-o", "/out/burner.folded"});
  auto recorded = docker(record, 60s);
  ASSERT_EQ(recorded.status, 0) << recorded.err;
  auto recording = read_folded(dumps_.path().string() + "/burner.folded");
  EXPECT_GT(burner_chain_samples(recording, "burner_a", recorded.err), 100u)
      << hottest_stacks(recording);
}

} // namespace
} // namespace flamebpf::testing
