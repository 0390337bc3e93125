// flamebpf against pods of a real containerd, made as its CRI plugin makes them for the kubelet:
// pods named <namespace>/<pod>/<container> from containerd's own state, selected by those names,
// followed across a new UID, and forged annotations that must name nothing.
#include <chrono>
#include <csignal>
#include <filesystem>
#include <gtest/gtest.h>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <sys/utsname.h>
#include <thread>
#include <unistd.h>

#include "container_harness.h"
#include "harness.h"
#include "pprof_tool.h"
#include "process.h"

namespace flamebpf::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// The per-target folded files of a run with -o <dir>/all.folded, by the name between "all." and
// ".folded".
std::map<std::string, std::map<std::string, uint64_t>> folded_files(const fs::path& dir)
{
  std::map<std::string, std::map<std::string, uint64_t>> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    if (name.starts_with("all.") && name.ends_with(".folded"))
      files[name.substr(4, name.size() - 4 - 7)] = read_folded(entry.path().string());
  }
  return files;
}

// The one file whose name starts with prefix (a target file name is the target's name with '_'
// for '/' and a hash mark); fails the test if there is not exactly one.
const std::map<std::string, uint64_t>*
file_starting(const std::map<std::string, std::map<std::string, uint64_t>>& files,
              const std::string& prefix)
{
  const std::map<std::string, uint64_t>* found = nullptr;
  size_t matches = 0;
  for (const auto& [name, folded] : files) {
    if (name.starts_with(prefix)) {
      found = &folded;
      ++matches;
    }
  }
  EXPECT_EQ(matches, 1u) << prefix;
  return found;
}

// The values of each tag of `go tool pprof -tags`: " pod: Total 95.0", then "  95.0 (100%): shop".
std::map<std::string, std::set<std::string>> pprof_tags(const std::string& output)
{
  std::map<std::string, std::set<std::string>> tags;
  std::istringstream lines(output);
  std::string key;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream row(line);
    std::string first;
    row >> first;
    if (line.find(": Total ") != std::string::npos && first.ends_with(':')) {
      key = first.substr(0, first.size() - 1);
      continue;
    }
    if (size_t colon = line.find("): "); !key.empty() && colon != std::string::npos)
      tags[key].insert(line.substr(colon + 3));
  }
  return tags;
}

std::string file_list(const std::map<std::string, std::map<std::string, uint64_t>>& files)
{
  std::string list;
  for (const auto& [name, unused] : files)
    list += name + " ";
  return list;
}

class KubernetesPodTest : public ::testing::Test {
protected:
  void SetUp() override { ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root"; }

  // A container of pod running /usr/bin/<program> for a minute, busy once this returns.
  Container run_burner(const CriContainerd::Pod& pod,
                       const std::string& container,
                       const std::string& program,
                       const std::map<std::string, std::string>& annotations = {})
  {
    auto started = containerd_.run(pod, container, {"/usr/bin/" + program, "60"}, annotations);
    wait_until_busy(started.pid, program);
    return started;
  }

  CriContainerd& containerd_ = CriContainerd::shared();
  ContainersRemovedAtEnd containers_removed_{containerd_};
  TempDir dir_{"/var/tmp"};
};

TEST_F(KubernetesPodTest, EveryContainerIsNamedByNamespacePodAndContainerAndNoSandboxIsATarget)
{
  auto shop = containerd_.start_pod("prod", "shop-7d9f");
  auto web = run_burner(shop, "web", "burner_a");
  run_burner(shop, "sidecar", "burner_b");
  auto cart = containerd_.start_pod("prod", "cart-5c4b");
  run_burner(cart, "web", "burner_c");
  std::string out = dir_.path().string() + "/all.folded";
  auto run = run_flamebpf({"--all-containers", "--containers-only", "-d", "3", "-o", out});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("profiling 3 containers"), std::string::npos) << run.output;

  auto files = folded_files(dir_.path());
  // Three files, each named after its container's three names: no sandbox, no host.
  ASSERT_EQ(files.size(), 3u) << file_list(files) << run.output;
  const std::map<std::string, const char*> owners{{"prod_shop-7d9f_web_", "burner_a"},
                                                  {"prod_shop-7d9f_sidecar_", "burner_b"},
                                                  {"prod_cart-5c4b_web_", "burner_c"}};
  for (const auto& [prefix, program] : owners) {
    const auto* folded = file_starting(files, prefix);
    ASSERT_NE(folded, nullptr) << file_list(files);
    EXPECT_GT(burner_chain_samples(*folded, program, run.output), 50u) << prefix;
    for (const auto& [other_prefix, other] : owners) {
      if (other != program) {
        EXPECT_EQ(count_with_prefix(*folded, std::string(other) + ";"), 0u)
            << other << " in " << prefix;
      }
    }
  }

  // pprof's labels, as go tool pprof reads them.
  std::string go = find_go();
  ASSERT_FALSE(go.empty()) << "go tool pprof is the oracle: install golang-go";
  fs::create_directory(dir_.path() / "pprof");
  auto pprof_run = run_flamebpf({"--all-containers", "--containers-only", "-d", "2", "-o",
                                 (dir_.path() / "pprof/all.pb.gz").string()});
  ASSERT_EQ(pprof_run.exit_code, 0) << pprof_run.output;
  std::string web_file;
  for (const auto& entry : fs::directory_iterator(dir_.path() / "pprof")) {
    if (entry.path().filename().string().starts_with("all.prod_shop-7d9f_web_"))
      web_file = entry.path().string();
  }
  ASSERT_FALSE(web_file.empty()) << pprof_run.output;
  PprofTool pprof(go, (dir_.path() / "pprof").string());
  auto tags = pprof_tags(pprof.run({"-tags"}, web_file));
  struct utsname host {};
  ASSERT_EQ(::uname(&host), 0);
  const std::map<std::string, std::set<std::string>> expected{{"target", {"prod/shop-7d9f/web"}},
                                                              {"container", {"web"}},
                                                              {"container_id", {web.id}},
                                                              {"namespace", {"prod"}},
                                                              {"pod", {"shop-7d9f"}},
                                                              {"node", {host.nodename}}};
  for (const auto& [key, values] : expected)
    EXPECT_EQ(tags[key], values) << key;
  EXPECT_TRUE(tags["comm"].contains("burner_a")) << web_file;
}

TEST_F(KubernetesPodTest, PodByNameIsAllItsContainersAndNothingElse)
{
  auto shop = containerd_.start_pod("prod", "shop-7d9f");
  run_burner(shop, "web", "burner_a");
  run_burner(shop, "sidecar", "burner_b");
  auto cart = containerd_.start_pod("prod", "cart-5c4b");
  run_burner(cart, "web", "burner_c");

  std::string pod_out = dir_.path().string() + "/pod.folded";
  auto run = run_flamebpf({"--cgroup", "prod/shop-7d9f", "-d", "3", "-o", pod_out});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto pod = read_folded(pod_out);
  EXPECT_GT(burner_chain_samples(pod, "burner_a", run.output), 50u);
  EXPECT_GT(burner_chain_samples(pod, "burner_b", run.output), 50u);
  EXPECT_EQ(count_with_prefix(pod, "burner_c;"), 0u);
  // One target, and each sample labelled with the container it was taken in.
  std::string go = find_go();
  ASSERT_FALSE(go.empty()) << "go tool pprof is the oracle: install golang-go";
  std::string pod_pprof = dir_.path().string() + "/pod.pb.gz";
  run = run_flamebpf({"--cgroup", "prod/shop-7d9f", "-d", "2", "-o", pod_pprof});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  PprofTool pprof(go, dir_.path().string());
  auto tags = pprof_tags(pprof.run({"-tags"}, pod_pprof));
  EXPECT_EQ(tags["target"], std::set<std::string>{"prod/shop-7d9f"});
  EXPECT_EQ(tags["container"], (std::set<std::string>{"sidecar", "web"}));
  EXPECT_EQ(tags["container_id"].size(), 2u);
  EXPECT_EQ(tags["pod"], std::set<std::string>{"shop-7d9f"});
  auto web_only = pprof.top({"-top", "-tagfocus", "container=web"}, pod_pprof);
  EXPECT_TRUE(web_only.contains("burner_a")) << pprof.run({"-top"}, pod_pprof);
  EXPECT_FALSE(web_only.contains("burner_b"));

  std::string container_out = dir_.path().string() + "/web.folded";
  run = run_flamebpf({"--cgroup", "prod/shop-7d9f/web", "-d", "3", "-o", container_out});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto web = read_folded(container_out);
  EXPECT_GT(burner_chain_samples(web, "burner_a", run.output), 50u);
  EXPECT_EQ(count_with_prefix(web, "burner_b;"), 0u);
  EXPECT_EQ(count_with_prefix(web, "burner_c;"), 0u);
}

TEST_F(KubernetesPodTest, UnknownPodExitsTwoAndListsTheClosestPods)
{
  auto shop = containerd_.start_pod("prod", "shop-7d9f");
  run_burner(shop, "web", "burner_a");
  for (std::string argument : {"prod/shop-7d9e", "prod/shop-7d9f/api"}) {
    auto run = run_flamebpf(
        {"--cgroup", argument, "-d", "1", "-o", dir_.path().string() + "/never.folded"});
    EXPECT_EQ(run.exit_code, 2) << run.output;
    EXPECT_NE(run.output.find("running pods: prod/shop-7d9f"), std::string::npos) << run.output;
  }
}

// A StatefulSet's pod is deleted and made again under its name, with a new UID and new
// containers: flamebpf follows the name.
TEST_F(KubernetesPodTest, PodRecreatedWithANewUidIsFollowed)
{
  auto first = containerd_.start_pod("prod", "db-0");
  run_burner(first, "postgres", "burner_r1");
  std::string out = dir_.path().string() + "/db.folded";
  std::string log = dir_.path().string() + "/log";
  Child profiler({FLAMEBPF_BINARY, "-v", "--cgroup", "prod/db-0", "--interval", "1", "-o", out}, "",
                 log);
  ASSERT_TRUE(wait_for_text(log, "sampling ", 30)) << read_text(log);
  // Kept: samples accrue for fixed times before and after the pod is made again.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  containerd_.remove_pod(first);
  auto second = containerd_.start_pod("prod", "db-0");
  ASSERT_NE(second.uid, first.uid);
  run_burner(second, "postgres", "burner_r2");
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));
  profiler.signal(SIGTERM);
  ASSERT_EQ(profiler.wait(), 0) << read_text(log);
  std::string context = read_text(log);
  auto folded = read_folded(out);
  EXPECT_GT(burner_chain_samples(folded, "burner_r1", context), 30u);
  EXPECT_GT(burner_chain_samples(folded, "burner_r2", context), 30u);
  EXPECT_NE(context.find("target prod/db-0: started again"), std::string::npos) << context;
}

// Whoever runs the runtime (or a compromised kubelet) writes the annotations: a '/', "..", a
// newline, 10 KB or markup in a name must not become a file name, a path or a log line of its
// own. Such a container is named by its ID, with one warning.
TEST_F(KubernetesPodTest, ForgedPodNamesNameNothingAndCostOneLineEach)
{
  const std::vector<std::map<std::string, std::string>> forgeries{
      {{"io.kubernetes.cri.sandbox-name", "../../../etc"}},
      {{"io.kubernetes.cri.sandbox-namespace", "prod\nflamebpf: error: forged"}},
      {{"io.kubernetes.cri.container-name", std::string(10000, 'w')}},
      {{"io.kubernetes.cri.container-name", "<svg onload=alert(1)>"}}};
  std::vector<Container> forged;
  for (size_t i = 0; i < forgeries.size(); ++i) {
    auto pod = containerd_.start_pod("prod", "forged-" + std::to_string(i));
    forged.push_back(run_burner(pod, "web", std::string(kBurnerNames[i]), forgeries[i]));
  }
  std::string out = dir_.path().string() + "/all.folded";
  auto run = run_flamebpf({"--all-containers", "--containers-only", "-d", "2", "-o", out});
  ASSERT_EQ(run.exit_code, 0) << run.output;

  auto files = folded_files(dir_.path());
  for (size_t i = 0; i < forged.size(); ++i) {
    std::string short_id = forged[i].id.substr(0, 12);
    ASSERT_TRUE(files.contains(short_id)) << file_list(files) << run.output;
    EXPECT_GT(burner_chain_samples(files[short_id], std::string(kBurnerNames[i]), run.output), 30u);
    size_t warnings = 0;
    for (size_t at = run.output.find("container " + short_id + " of containerd");
         at != std::string::npos;
         at = run.output.find("container " + short_id + " of containerd", at + 1))
      ++warnings;
    EXPECT_EQ(warnings, 1u) << run.output;
  }
  // Only plain files in the output directory, and no log line was forged.
  for (const auto& entry : fs::recursive_directory_iterator(dir_.path()))
    EXPECT_TRUE(entry.is_regular_file()) << entry.path();
  EXPECT_EQ(run.output.find("\nflamebpf: error: forged"), std::string::npos) << run.output;
  // Every line of every folded file is one stack and its count.
  static const std::regex folded_line(R"(^[^ ]([^\n]*[^ ])? [1-9][0-9]*$)");
  for (const auto& [name, unused] : files) {
    std::istringstream lines(read_text(dir_.path().string() + "/all." + name + ".folded"));
    for (std::string line; std::getline(lines, line);)
      EXPECT_TRUE(std::regex_match(line, folded_line)) << name << ": " << line;
  }

  // Beside them a pod with real names: its stacks start with them (--target-frame), in flame
  // graphs that stay well-formed XML, and in an agent's dumps, whose directories stay inside.
  auto shop = containerd_.start_pod("prod", "shop-7d9f");
  run_burner(shop, "web", "burner_k8s");
  fs::create_directory(dir_.path() / "svg");
  run = run_flamebpf({"--all-containers", "--containers-only", "--target-frame", "-d", "2", "-o",
                      (dir_.path() / "svg/all.svg").string()});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  size_t svgs = 0;
  bool pod_frame = false;
  for (const auto& entry : fs::directory_iterator(dir_.path() / "svg")) {
    auto lint = run_process({"/usr/bin/xmllint", "--noout", entry.path().string()}, {}, 60s);
    EXPECT_EQ(lint.status, 0) << entry.path() << ": " << lint.err;
    std::string svg = read_text(entry.path().string());
    EXPECT_EQ(svg.find("<svg onload"), std::string::npos) << entry.path();
    pod_frame = pod_frame || svg.find(R"(data-n="prod/shop-7d9f/web")") != std::string::npos;
    ++svgs;
  }
  EXPECT_EQ(svgs, forged.size() + 1) << run.output;
  EXPECT_TRUE(pod_frame) << "no SVG has the frame prod/shop-7d9f/web";

  fs::path dumps = dir_.path() / "dumps";
  run = run_flamebpf({"--all-containers", "--containers-only", "--target-frame", "--output-dir",
                      dumps.string(), "--interval", "1", "-d", "2.5", "--format", "folded,svg"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::set<std::string> target_dirs;
  for (const auto& entry : fs::directory_iterator(dumps)) {
    if (entry.is_directory())
      target_dirs.insert(entry.path().filename().string());
  }
  EXPECT_EQ(target_dirs.size(), forged.size() + 1) << run.output;
  // One level of target directories, files and links to their neighbours in them, nothing deeper.
  for (const auto& entry : fs::recursive_directory_iterator(dumps)) {
    fs::path relative = entry.path().lexically_relative(dumps);
    EXPECT_LE(std::distance(relative.begin(), relative.end()), 2) << relative;
    if (entry.is_symlink()) {
      EXPECT_FALSE(fs::read_symlink(entry.path()).has_parent_path()) << relative;
    }
  }
  std::string pod_dir;
  for (const auto& name : target_dirs) {
    if (name.starts_with("prod_shop-7d9f_web_"))
      pod_dir = name;
  }
  ASSERT_FALSE(pod_dir.empty()) << run.output;
  uint64_t pod_samples = 0;
  for (const auto& window : fs::directory_iterator(dumps / pod_dir)) {
    if (window.is_symlink() || window.path().extension() != ".folded")
      continue;
    auto folded = read_folded(window.path().string());
    pod_samples += count_with_prefix(folded, "prod/shop-7d9f/web;burner_k8s;");
    EXPECT_EQ(total_count(folded), count_with_prefix(folded, "prod/shop-7d9f/web;"))
        << hottest_stacks(folded);
  }
  EXPECT_GT(pod_samples, 30u) << run.output;
  // The stats lines name the pod's container as the labels do.
  std::string stats = read_text((dumps / "flamebpf-stats.jsonl").string());
  EXPECT_NE(stats.find(R"("prod/shop-7d9f/web":{"samples":)"), std::string::npos) << stats;
  EXPECT_NE(stats.find(R"("namespace":"prod","pod":"shop-7d9f")"), std::string::npos) << stats;
}

} // namespace
} // namespace flamebpf::testing
