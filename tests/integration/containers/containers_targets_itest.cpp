// flamebpf against real Docker containers: targets by name, ID and pod, every container at once,
// sub-cgroups, and a container restarted under the same name.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <unistd.h>

#include "container_harness.h"
#include "dumps/dump_files.h"
#include "harness.h"
#include "pprof_tool.h"

namespace flamebpf::testing {
namespace {

// The host pid of the process named comm, waiting up to 10 s for it to appear.
pid_t find_process(const std::string& comm)
{
  pid_t found = -1;
  poll_until(
      [&] {
        for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
          std::string name = entry.path().filename();
          if (name.find_first_not_of("0123456789") == std::string::npos &&
              read_text(entry.path().string() + "/comm") == comm + "\n")
            found = static_cast<pid_t>(std::stoi(name));
        }
        return found > 0;
      },
      std::chrono::seconds(10), std::chrono::milliseconds(50));
  return found;
}

class ContainerTargetTest : public ::testing::Test {
protected:
  void SetUp() override
  {
    ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
    image_ = docker_.burner_image();
  }

  DockerDaemon::Container run_burner(const std::string& name,
                                     const std::string& program,
                                     const std::vector<std::string>& options = {})
  {
    auto container = docker_.run(name, options, image_, {"/usr/bin/" + program, "60"});
    // Sampling finds the workload in its loop.
    wait_until_busy(container.pid, program);
    return container;
  }

  DockerDaemon& docker_ = DockerDaemon::shared();
  ContainersRemovedAtEnd containers_removed_{docker_};
  std::string image_;
  TempDir dir_;
};

TEST_F(ContainerTargetTest, ByNameAndByShortIdOnlyThatContainer)
{
  auto a = run_burner("ct-a", "burner_a");
  run_burner("ct-b", "burner_b");
  for (const std::string& argument : {std::string("ct-a"), a.id.substr(0, 12)}) {
    std::string out = dir_.path().string() + "/out.folded";
    auto run = run_flamebpf({"--cgroup", argument, "-d", "3", "-o", out});
    ASSERT_EQ(run.exit_code, 0) << run.output;
    auto folded = read_folded(out);
    EXPECT_GT(burner_chain_samples(folded, "burner_a", run.output), 100u) << argument;
    EXPECT_EQ(count_with_prefix(folded, "burner_b"), 0u) << argument;
    EXPECT_GE(count_with_prefix(folded, "burner_a;") * 100, total_count(folded) * 90) << argument;
  }
}

TEST_F(ContainerTargetTest, UnknownNameListsTheRunningContainers)
{
  run_burner("ct-web", "burner_a");
  auto run = run_flamebpf({"--cgroup", "ct-wbe", "-d", "1", "-o", "/dev/null"});
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("unknown cgroup or container ct-wbe"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("running containers: ct-web"), std::string::npos) << run.output;
  EXPECT_EQ(std::count(run.output.begin(), run.output.end(), '\n'), 1) << run.output;
}

TEST_F(ContainerTargetTest, AllContainersOneFilePerContainerAndLaterOnes)
{
  run_burner("ct-a", "burner_a");
  run_burner("ct-b", "burner_b");
  auto host_burner = copy_burner(dir_.path(), "burner_host");
  Child host({host_burner, "30"});
  wait_until_busy(host.pid(), "burner_host");
  std::string out = dir_.path().string() + "/all.folded";
  std::string log = dir_.path().string() + "/log";
  Child profiler({FLAMEBPF_BINARY, "--all-containers", "-o", out}, "", log);
  ASSERT_TRUE(wait_for_text(log, "profiling 2 containers and the host", 30)) << read_text(log);
  // A container started after flamebpf is found too. The run ends a fixed time after it started
  // (SIGTERM writes the profiles), however long starting took on a loaded machine.
  // Kept: samples accrue for fixed times before and after ct-c starts.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  run_burner("ct-c", "burner_c");
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));
  profiler.signal(SIGTERM);
  ASSERT_EQ(profiler.wait(), 0) << read_text(log);
  std::string context = read_text(log);

  auto a = read_folded(dir_.path().string() + "/all.ct-a.folded");
  auto b = read_folded(dir_.path().string() + "/all.ct-b.folded");
  auto c = read_folded(dir_.path().string() + "/all.ct-c.folded");
  auto host_profile = read_folded(dir_.path().string() + "/all.host.folded");
  EXPECT_GT(burner_chain_samples(a, "burner_a", context), 50u);
  EXPECT_GT(burner_chain_samples(b, "burner_b", context), 50u);
  EXPECT_GT(burner_chain_samples(c, "burner_c", context), 30u);
  EXPECT_GT(burner_chain_samples(host_profile, "burner_host", context), 50u);
  // Each file holds its own container's processes only (a starting container also shows runc).
  const std::map<std::string, const std::map<std::string, uint64_t>*> files{
      {"burner_a", &a}, {"burner_b", &b}, {"burner_c", &c}, {"burner_host", &host_profile}};
  for (const auto& [owner, folded] : files) {
    for (const auto& [other, unused] : files) {
      if (other != owner) {
        EXPECT_EQ(count_with_prefix(*folded, other + ";"), 0u) << other << " in " << owner;
      }
    }
  }
  EXPECT_NE(context.find("target ct-c: container"), std::string::npos) << context;
}

TEST_F(ContainerTargetTest, ContainersOnlyWritesNoHostFile)
{
  run_burner("ct-a", "burner_a");
  auto host_burner = copy_burner(dir_.path(), "burner_host");
  Child host({host_burner, "30"});
  wait_until_busy(host.pid(), "burner_host");
  std::string out = dir_.path().string() + "/all.folded";
  auto run = run_flamebpf({"--all-containers", "--containers-only", "-d", "2", "-o", out});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_FALSE(std::filesystem::exists(dir_.path().string() + "/all.host.folded")) << run.output;
  EXPECT_GT(burner_chain_samples(read_folded(dir_.path().string() + "/all.ct-a.folded"), "burner_a",
                                 run.output),
            50u);
}

TEST_F(ContainerTargetTest, TargetFrameSeparatesContainersInOneStream)
{
  run_burner("ct-a", "burner_a");
  run_burner("ct-b", "burner_b");
  std::string out = dir_.path().string() + "/merged.folded";
  auto run = run_flamebpf(
      {"--cgroup", "ct-a", "--cgroup", "ct-b", "--target-frame", "-d", "2", "-o", out});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // Two targets: one file each, each stack rooted at its target.
  auto a = read_folded(dir_.path().string() + "/merged.ct-a.folded");
  EXPECT_GT(count_with_prefix(a, "ct-a;burner_a;"), 50u) << run.output;
  EXPECT_EQ(total_count(a), count_with_prefix(a, "ct-a;burner_a;"));
  auto b = read_folded(dir_.path().string() + "/merged.ct-b.folded");
  EXPECT_GT(count_with_prefix(b, "ct-b;burner_b;"), 50u) << run.output;
}

TEST_F(ContainerTargetTest, KubernetesShapedParentResolvesById)
{
  std::string uid = read_text("/proc/sys/kernel/random/uuid");
  uid = uid.substr(0, uid.find('\n'));
  auto pod = run_burner("ct-k8s", "burner_k8s", {"--cgroup-parent=/kubepods/burstable/pod" + uid});
  run_burner("ct-b", "burner_b");
  ASSERT_NE(pod.cgroup2_path.find("/kubepods/burstable/pod" + uid + "/" + pod.id),
            std::string::npos)
      << pod.cgroup2_path;
  for (const std::string& argument : {pod.id, uid}) {
    std::string out = dir_.path().string() + "/k8s.folded";
    auto run = run_flamebpf({"--cgroup", argument, "-d", "2", "-o", out});
    ASSERT_EQ(run.exit_code, 0) << run.output;
    auto folded = read_folded(out);
    EXPECT_GT(burner_chain_samples(folded, "burner_k8s", run.output), 50u) << argument;
    EXPECT_EQ(count_with_prefix(folded, "burner_b"), 0u) << argument;
  }
}

TEST_F(ContainerTargetTest, ProcessInASubCgroupCountsForTheContainer)
{
  auto container = docker_.run("ct-sub", {}, image_, {"/bin/sleep", "60"});
  std::string sub = container.cgroup2_path + "/workers";
  ASSERT_EQ(::mkdir(sub.c_str(), 0755), 0) << sub;
  docker_.docker({"exec", "-d", "ct-sub", "/usr/bin/burner_sub", "60"});
  pid_t worker = find_process("burner_sub");
  ASSERT_GT(worker, 0);
  std::ofstream(sub + "/cgroup.procs") << worker;
  ASSERT_NE(read_text("/proc/" + std::to_string(worker) + "/cgroup").find("/workers"),
            std::string::npos);
  wait_until_busy(worker, "burner_sub");
  std::string out = dir_.path().string() + "/sub.folded";
  auto run = run_flamebpf({"--cgroup", "ct-sub", "-d", "2", "-o", out});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_GT(burner_chain_samples(read_folded(out), "burner_sub", run.output), 50u);
}

TEST_F(ContainerTargetTest, ContainerRestartedUnderTheSameNameIsFollowed)
{
  auto first = run_burner("ct-r", "burner_r1");
  std::string out = dir_.path().string() + "/r.folded";
  std::string log = dir_.path().string() + "/log";
  Child profiler(
      {FLAMEBPF_BINARY, "-v", "--cgroup", "ct-r", "--interval", "1", "-d", "4.5", "-o", out}, "",
      log);
  ASSERT_TRUE(wait_for_text(log, "sampling ", 30)) << read_text(log);
  // Kept: the first container's samples accrue for 1.5 s.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  docker_.remove("ct-r");
  auto second = run_burner("ct-r", "burner_r2");
  ASSERT_NE(first.id, second.id);
  ASSERT_EQ(profiler.wait(), 0) << read_text(log);
  std::string context = read_text(log);
  auto folded = read_folded(out);
  EXPECT_GT(burner_chain_samples(folded, "burner_r1", context), 50u);
  EXPECT_GT(burner_chain_samples(folded, "burner_r2", context), 50u);
  EXPECT_NE(context.find("target ct-r: container " + first.id.substr(0, 12) +
                         " stopped; waiting for it to start again"),
            std::string::npos)
      << context;
  EXPECT_NE(context.find("target ct-r: started again as container " + second.id.substr(0, 12)),
            std::string::npos)
      << context;
  EXPECT_EQ(context.find("flamebpf: error"), std::string::npos) << context;
}

TEST_F(ContainerTargetTest, AgentDumpsEachContainerEveryIntervalInEveryFormat)
{
  run_burner("ct-a", "burner_a");
  run_burner("ct-b", "burner_b");
  // Three windows: start just after a wall-clock multiple of 2 s, stop well before the third.
  auto now = std::chrono::system_clock::now().time_since_epoch();
  auto next = std::chrono::seconds(
      std::chrono::duration_cast<std::chrono::seconds>(now).count() / 2 * 2 + 2);
  // Kept: a wait for the wall clock itself, whose multiples of 2 s are the windows' edges.
  std::this_thread::sleep_for(next - now + std::chrono::milliseconds(50));
  std::string out = dir_.path().string() + "/dumps";
  auto run = run_flamebpf({"--all-containers", "--containers-only", "--output-dir", out,
                           "--interval", "2", "-d", "5.4", "--format", "folded,svg,pprof"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::string go = find_go();
  ASSERT_FALSE(go.empty()) << "go tool pprof is needed: install golang-go";
  for (const auto& [name, comm] : {std::pair("ct-a", "burner_a"), std::pair("ct-b", "burner_b")}) {
    std::string target = out + "/" + name;
    auto dumps = dumps::list_dumps(target);
    ASSERT_EQ(dumps.size(), 3u) << target << "\n" << run.output;
    for (const auto& dump : dumps) {
      ASSERT_EQ(dump.files.size(), 3u);
      auto folded = read_folded(target + "/" + dump.files[0]);
      EXPECT_GT(burner_chain_samples(folded, comm, run.output), 30u) << dump.files[0];
      std::string other = std::string(comm) == "burner_a" ? "burner_b" : "burner_a";
      EXPECT_EQ(count_with_prefix(folded, other + ";"), 0u);
    }
    // go tool pprof reads the middle interval's profile and agrees with its folded file.
    const auto& middle = dumps[1];
    auto folded = read_folded(target + "/" + middle.files[0]);
    auto expected = folded_counts(folded);
    auto rows = PprofTool(go, dir_.path())
                    .top({"-top", "-nodecount=100", "-nodefraction=0", "-sample_index=samples"},
                         target + "/" + middle.files[1]);
    for (const char* function : {"a", "b", "c", "run", "main"}) {
      ASSERT_TRUE(rows.contains(function)) << function;
      EXPECT_EQ(rows.at(function), expected.at(function)) << function;
    }
    EXPECT_EQ(rows.at(comm), expected.at(comm));
  }
  EXPECT_FALSE(std::filesystem::exists(out + "/host"));
  // The two containers map copies of the same files (their image's libc and loader, and two
  // copies of the burner): one symbol table serves each file's copies.
  std::istringstream stats(read_text(out + "/flamebpf-stats.jsonl"));
  std::string last;
  for (std::string line; std::getline(stats, line);)
    last = line;
  auto occupancy = nlohmann::json::parse(last).at("occupancy");
  size_t files = occupancy.at("elf_files");
  size_t tables = occupancy.at("symbol_tables");
  EXPECT_GE(files, 6u) << last;
  EXPECT_LE(tables * 2, files) << last;
  std::printf("[ FIGURES  ] two containers of one image: %zu ELF files, %zu symbol tables\n", files,
              tables);
}

} // namespace
} // namespace flamebpf::testing
