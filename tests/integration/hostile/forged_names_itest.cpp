// Names and containers that any user of the host can forge, against the real kernel: a program of
// an unprivileged user named dockerd or conmon, and a container-like cgroup (docker-<id>.scope) in
// a subtree delegated to a user, as systemd delegates one to each user's manager.
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <gtest/gtest.h>
#include <set>
#include <string>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <thread>
#include <unistd.h>

#include "harness.h"

#ifndef IMPOSTOR_BINARY
#error "define IMPOSTOR_BINARY as the path of the impostor program (tests/CMakeLists.txt)"
#endif

namespace flamebpf::testing {
namespace {

namespace fs = std::filesystem;

constexpr uid_t kNobody = 65534;

// A container ID of this test process's own, so that runs at once never share one.
std::string container_id(int which)
{
  std::string id = fmt::format("{:08x}{:08x}", static_cast<unsigned>(::getpid()), which);
  while (id.size() < 64)
    id += "c0ffee";
  return id.substr(0, 64);
}

std::string short_id(const std::string& id)
{
  return id.substr(0, 12);
}

// Every file name in dir.
std::set<std::string> file_names(const std::string& dir)
{
  std::set<std::string> names;
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator(dir, ignored))
    names.insert(entry.path().filename().string());
  return names;
}

class ForgedNamesTest : public ::testing::Test {
protected:
  void SetUp() override
  {
    ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
    // The unprivileged user runs programs from here.
    fs::permissions(dir_.path(), fs::perms::owner_all | fs::perms::group_read |
                                     fs::perms::group_exec | fs::perms::others_read |
                                     fs::perms::others_exec);
    impostor_ = dir_.path().string() + "/impostor";
    fs::copy_file(IMPOSTOR_BINARY, impostor_);
    fs::permissions(impostor_, fs::perms::owner_all | fs::perms::group_exec |
                                   fs::perms::others_exec | fs::perms::others_read);
  }

  // A program of the unprivileged user posing as `runtime` with the given arguments.
  std::unique_ptr<Child> impostor(const std::vector<std::string>& args)
  {
    std::vector<std::string> argv{"/usr/bin/setpriv", "--reuid=" + std::to_string(kNobody),
                                  "--regid=" + std::to_string(kNobody), "--clear-groups",
                                  impostor_};
    argv.insert(argv.end(), args.begin(), args.end());
    return std::make_unique<Child>(argv);
  }

  TempDir dir_;
  std::string impostor_;
};

TEST_F(ForgedNamesTest, AUsersProgramNamedLikeARuntimeNamesNoContainer)
{
  TempCgroup sandbox;
  // Two containers (cgroups root made, named after container IDs) that no runtime names.
  std::string docker_like = container_id(1);
  std::string podman_like = container_id(2);
  ASSERT_EQ(::mkdir((sandbox.path() + "/" + docker_like).c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((sandbox.path() + "/" + podman_like).c_str(), 0755), 0);
  Child first({copy_burner(dir_.path(), "burner_one"), "15"}, sandbox.path() + "/" + docker_like);
  Child second({copy_burner(dir_.path(), "burner_two"), "15"}, sandbox.path() + "/" + podman_like);
  // The user's "dockerd", whose data root calls the first payments-db, and "conmon", which calls
  // the second ledger.
  std::string data_root = dir_.path().string() + "/data";
  fs::create_directories(data_root + "/containers/" + docker_like);
  std::ofstream(data_root + "/containers/" + docker_like + "/config.v2.json") << fmt::format(
      R"({{"ID":"{}","Name":"/payments-db","State":{{"Running":true}}}})", docker_like);
  auto dockerd = impostor({"dockerd", "--data-root", data_root});
  auto conmon = impostor({"conmon", "-c", podman_like, "-n", "ledger"});
  wait_until_busy(first.pid(), "burner_one");
  wait_until_busy(second.pid(), "burner_two");
  wait_until_started(dockerd->pid(), "dockerd");
  wait_until_started(conmon->pid(), "conmon");
  ASSERT_EQ(read_text("/proc/" + std::to_string(dockerd->pid()) + "/comm"), "dockerd\n");

  std::string out = dir_.path().string() + "/out";
  fs::create_directories(out);
  auto run =
      run_flamebpf({"--all-containers", "--containers-only", "-d", "2", "-o", out + "/all.folded"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto files = file_names(out);
  EXPECT_TRUE(files.contains("all." + short_id(docker_like) + ".folded")) << run.output;
  EXPECT_TRUE(files.contains("all." + short_id(podman_like) + ".folded")) << run.output;
  EXPECT_EQ(run.output.find("payments-db"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("ledger"), std::string::npos) << run.output;
  for (const auto& file : files) {
    EXPECT_EQ(file.find("payments-db"), std::string::npos) << file;
    EXPECT_EQ(file.find("ledger"), std::string::npos) << file;
  }

  auto by_name = run_flamebpf({"--cgroup", "payments-db", "-d", "1", "-o", out + "/named.folded"});
  EXPECT_EQ(by_name.exit_code, 2) << by_name.output;
}

TEST_F(ForgedNamesTest, AContainerCgroupInAUsersSubtreeIsNoContainer)
{
  TempCgroup sandbox;
  std::string id = container_id(3);
  // The real one, made by root as a runtime makes it.
  std::string real = sandbox.path() + "/" + id;
  ASSERT_EQ(::mkdir(real.c_str(), 0755), 0);
  // A subtree delegated to the user, and in it a cgroup named like Docker's for the same ID.
  std::string delegated = sandbox.path() + "/user-65534.slice";
  std::string forged = delegated + "/docker-" + id + ".scope";
  ASSERT_EQ(::mkdir(delegated.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(forged.c_str(), 0755), 0);
  for (const auto& path : {delegated, forged, forged + "/cgroup.procs"})
    ASSERT_EQ(::chown(path.c_str(), kNobody, kNobody), 0) << path;
  Child inside({copy_burner(dir_.path(), "burner_real"), "15"}, real);
  Child poser({copy_burner(dir_.path(), "burner_poser"), "15"}, forged);
  wait_until_busy(inside.pid(), "burner_real");
  wait_until_busy(poser.pid(), "burner_poser");

  std::string out = dir_.path().string() + "/out";
  fs::create_directories(out);
  auto by_id = run_flamebpf({"--cgroup", short_id(id), "-d", "2", "-o", out + "/one.folded"});
  ASSERT_EQ(by_id.exit_code, 0) << by_id.output;
  auto folded = read_folded(out + "/one.folded");
  EXPECT_GT(count_with_prefix(folded, "burner_real;"), 20u) << by_id.output;
  EXPECT_EQ(count_with_prefix(folded, "burner_poser;"), 0u) << by_id.output;

  auto all = run_flamebpf({"--all-containers", "-d", "2", "-o", out + "/all.folded"});
  ASSERT_EQ(all.exit_code, 0) << all.output;
  auto files = file_names(out);
  std::string container_file = "all." + short_id(id) + ".folded";
  ASSERT_TRUE(files.contains(container_file)) << all.output;
  auto container = read_folded(out + "/" + container_file);
  EXPECT_GT(count_with_prefix(container, "burner_real;"), 20u) << all.output;
  EXPECT_EQ(count_with_prefix(container, "burner_poser;"), 0u) << all.output;
  // The poser is a process of the host like any other, and no second file bears the ID.
  EXPECT_GT(count_with_prefix(read_folded(out + "/all.host.folded"), "burner_poser;"), 20u);
  for (const auto& file : files) {
    if (file != container_file) {
      EXPECT_EQ(file.find(short_id(id)), std::string::npos) << file;
    }
  }
}

TEST_F(ForgedNamesTest, ADeviceARuntimesCommandLineNamesIsNeverOpened)
{
  // A device node that does nothing when opened, watched for opens: a hardware watchdog in its
  // place would arm on the first open and reboot the host.
  std::string device = dir_.path().string() + "/watchdog";
  ASSERT_EQ(::mknod(device.c_str(), S_IFCHR | 0666, ::makedev(1, 3)), 0);
  int watch = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  ASSERT_GE(watch, 0);
  ASSERT_GE(::inotify_add_watch(watch, device.c_str(), IN_OPEN), 0);
  // Root's runtime (a program only root may change, run as root) and a user's, both naming the
  // device as their configuration file.
  Child roots({impostor_, "dockerd", "--config-file", device});
  auto users = impostor({"dockerd", "--config-file", device});
  wait_until_started(roots.pid(), "dockerd");
  wait_until_started(users->pid(), "dockerd");
  auto run =
      run_flamebpf({"--all-containers", "-d", "1", "-o", dir_.path().string() + "/all.folded"});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  char events[4096];
  ssize_t opened = ::read(watch, events, sizeof events);
  ::close(watch);
  EXPECT_LT(opened, 0) << "flamebpf opened the device " << device << "\n" << run.output;
}

} // namespace
} // namespace flamebpf::testing
