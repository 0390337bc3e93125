// Self-tests of the container harness: the containers it makes are real Docker and podman
// containers, and it cleans up after itself and after killed runs.
#include <algorithm>
#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <gtest/gtest.h>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "container_harness.h"
#include "harness.h"
#include "temp_dir.h"
#include "wait.h"

namespace flamebpf::testing {
namespace {

namespace fs = std::filesystem;

// Prints how long each step took, for the record of what container tests cost.
class Stopwatch {
public:
  void lap(const std::string& step)
  {
    auto now = std::chrono::steady_clock::now();
    std::printf("[  TIMING  ] %-28s %6.2f s\n", step.c_str(),
                std::chrono::duration<double>(now - last_).count());
    std::fflush(stdout);
    last_ = now;
  }

private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

std::vector<std::string> status_field(pid_t pid, const std::string& name)
{
  std::istringstream lines(read_text("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with(name + ":")) {
      std::istringstream words(line.substr(name.size() + 1));
      std::vector<std::string> values;
      for (std::string word; words >> word;)
        values.push_back(word);
      return values;
    }
  }
  return {};
}

ino_t inode(const std::string& path)
{
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 ? info.st_ino : 0;
}

std::string comm(pid_t pid)
{
  std::string text = read_text("/proc/" + std::to_string(pid) + "/comm");
  return text.substr(0, text.find('\n'));
}

std::string random_uuid()
{
  std::string text = read_text("/proc/sys/kernel/random/uuid");
  return text.substr(0, text.find('\n'));
}

bool is_hex_id(const std::string& id)
{
  return id.size() == 64 && id.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// Which of name exists at the top of each cgroup hierarchy.
std::map<std::string, bool> top_level_cgroups(const std::string& name)
{
  std::map<std::string, bool> exists;
  for (const auto& mount : cgroup_mount_points())
    exists[mount + "/" + name] = fs::exists(mount + "/" + name);
  return exists;
}

// Host-wide runtime files: the shims' sockets live in containerd's fixed directory.
std::set<std::string> shim_sockets()
{
  std::set<std::string> names;
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator("/run/containerd/s", ignored))
    names.insert(entry.path().filename().string());
  return names;
}

// The elements of after that are not in before.
std::vector<std::string> added(const std::set<std::string>& before,
                               const std::set<std::string>& after)
{
  std::vector<std::string> difference;
  std::ranges::set_difference(after, before, std::back_inserter(difference));
  return difference;
}

// A host file as it is now: whether it exists, and its content.
struct HostFile {
  bool exists = false;
  std::string content;
  bool operator==(const HostFile&) const = default;
};

HostFile host_file(const std::string& path)
{
  return HostFile{fs::exists(path), read_text(path)};
}

// The parent of pid (field 4 of /proc/<pid>/stat), or -1.
pid_t parent_pid(pid_t pid)
{
  std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  auto name_end = stat.rfind(')');
  if (name_end == std::string::npos)
    return -1;
  std::istringstream fields(stat.substr(name_end + 1));
  std::string state;
  pid_t parent = -1;
  fields >> state >> parent;
  return parent;
}

std::vector<std::string> command_line(pid_t pid)
{
  std::istringstream text(read_text("/proc/" + std::to_string(pid) + "/cmdline"));
  std::vector<std::string> args;
  for (std::string arg; std::getline(text, arg, '\0');)
    args.push_back(arg);
  return args;
}

// The argument after option, or "" if option is not there.
std::string option_value(const std::vector<std::string>& args, const std::string& option)
{
  auto it = std::ranges::find(args, option);
  return it != args.end() && it + 1 != args.end() ? *(it + 1) : "";
}

// Host-wide state that podman and runc use by default and a PodmanRuntime must never create.
constexpr std::array<const char*, 8> kPodmanHostPaths{
    "/var/lib/containers",  "/run/containers",          "/run/libpod",  "/run/runc",
    "/dev/shm/libpod_lock", "/etc/containers/networks", "/var/lib/cni", "/run/netns"};

std::map<std::string, bool> podman_host_paths()
{
  std::map<std::string, bool> exists;
  for (const char* path : kPodmanHostPaths)
    exists[path] = fs::exists(path);
  return exists;
}

// Every entry of after that did not exist in before but exists now.
std::vector<std::string> created(const std::map<std::string, bool>& before)
{
  std::vector<std::string> paths;
  for (const auto& [path, existed] : before) {
    if (!existed && fs::exists(path))
      paths.push_back(path);
  }
  return paths;
}

TEST(DockerDaemonTest, BurnerContainerIsARealContainer)
{
  Stopwatch watch;
  DockerDaemon daemon;
  watch.lap("dockerd start");
  std::string image = daemon.burner_image();
  watch.lap("burner image build");
  auto container = daemon.run("real", {}, image, {"burner_a", "60"});
  watch.lap("docker run");

  EXPECT_EQ(container.name, "real");
  EXPECT_TRUE(is_hex_id(container.id)) << container.id;
  EXPECT_EQ(comm(container.pid), "burner_a");

  // Its own PID namespace, in which it is the first process.
  auto nspid = status_field(container.pid, "NSpid");
  ASSERT_EQ(nspid.size(), 2u);
  EXPECT_EQ(nspid[0], std::to_string(container.pid));
  EXPECT_NE(nspid[1], std::to_string(container.pid));
  std::string proc = "/proc/" + std::to_string(container.pid);
  EXPECT_NE(inode(proc + "/ns/pid"), inode("/proc/self/ns/pid"));
  EXPECT_NE(inode(proc + "/ns/mnt"), inode("/proc/self/ns/mnt"));

  // Docker's cgroup, in cgroup2 and (on hybrid hosts) in every v1 hierarchy.
  EXPECT_EQ(container.cgroup2_path, cgroup2_mount() + "/docker/" + container.id);
  EXPECT_TRUE(fs::is_directory(container.cgroup2_path));
  EXPECT_NE(read_text(container.cgroup2_path + "/cgroup.procs").find(std::to_string(container.pid)),
            std::string::npos);
  EXPECT_NE(read_text(proc + "/cgroup").find("0::/docker/" + container.id + "\n"),
            std::string::npos);

  // The image is not the host: the workload runs from the container's overlay root.
  EXPECT_TRUE(fs::exists(proc + "/root/usr/bin/burner_k8s"));
  EXPECT_FALSE(fs::exists("/usr/bin/burner_k8s"));
}

TEST(DockerDaemonTest, CgroupParentGivesKubernetesLikePath)
{
  DockerDaemon daemon;
  std::string parent = "/kubepods/burstable/pod" + random_uuid();
  auto container =
      daemon.run("pod", {"--cgroup-parent=" + parent}, daemon.burner_image(), {"burner_k8s", "60"});
  EXPECT_EQ(container.cgroup2_path, cgroup2_mount() + parent + "/" + container.id);
  EXPECT_TRUE(fs::is_directory(container.cgroup2_path));
  EXPECT_EQ(comm(container.pid), "burner_k8s");
}

TEST(DockerDaemonTest, RemoveEndsTheContainer)
{
  DockerDaemon daemon;
  auto container = daemon.run("short", {}, daemon.burner_image(), {"burner_b", "60"});
  ASSERT_TRUE(process_alive(container.pid));
  Stopwatch watch;
  daemon.remove("short");
  watch.lap("docker rm -f");
  EXPECT_FALSE(process_alive(container.pid));
  EXPECT_FALSE(fs::exists(container.cgroup2_path));
  EXPECT_EQ(daemon.docker({"ps", "-aq"}), "");
}

TEST(DockerDaemonTest, DestructionLeavesNothingBehind)
{
  // Only what did not exist before must be gone after: another daemon may share /docker.
  auto docker_before = top_level_cgroups("docker");
  auto kubepods_before = top_level_cgroups("kubepods");
  auto sockets_before = shim_sockets();
  // dockerd's identity key: a host that ran Docker before has one, which must stay as it is.
  constexpr const char* kHostKey = "/etc/docker/key.json";
  HostFile key_before = host_file(kHostKey);
  std::string parent = "/kubepods/besteffort/pod" + random_uuid();
  std::string work_dir;
  pid_t dockerd = -1;
  pid_t containerd = -1;
  std::vector<DockerDaemon::Container> containers;
  Stopwatch watch;
  {
    DockerDaemon daemon;
    work_dir = daemon.work_dir();
    dockerd = daemon.dockerd_pid();
    containerd = daemon.containerd_pid();
    std::string image = daemon.burner_image();
    containers.push_back(daemon.run("plain", {}, image, {"burner_c", "60"}));
    containers.push_back(daemon.run("pod", {"--cgroup-parent", parent}, image, {"burner_d", "60"}));
    // Left running: the destructor must remove them.
    ASSERT_TRUE(fs::is_directory(work_dir));
    ASSERT_GT(containerd, 0);
    watch.lap("start, build, run two");
  }
  watch.lap("daemon shutdown and cleanup");

  EXPECT_FALSE(process_alive(dockerd));
  EXPECT_FALSE(process_alive(containerd));
  EXPECT_EQ(processes_mentioning(work_dir), std::vector<pid_t>{});
  for (const auto& container : containers)
    EXPECT_FALSE(process_alive(container.pid)) << container.name;
  EXPECT_FALSE(fs::exists(work_dir));
  EXPECT_EQ(read_text("/proc/self/mountinfo").find(work_dir), std::string::npos);
  for (const auto& mount : cgroup_mount_points()) {
    for (const auto& container : containers) {
      EXPECT_FALSE(fs::exists(mount + "/docker/" + container.id));
      EXPECT_FALSE(fs::exists(mount + parent + "/" + container.id));
    }
    EXPECT_FALSE(fs::exists(mount + parent));
  }
  docker_before.merge(kubepods_before);
  for (const auto& [dir, existed] : docker_before)
    EXPECT_TRUE(existed || !fs::exists(dir)) << dir << " is left behind";
  EXPECT_TRUE(host_file(kHostKey) == key_before)
      << kHostKey << (key_before.exists ? " was changed or removed" : " was created");
  EXPECT_EQ(added(sockets_before, shim_sockets()), std::vector<std::string>{});
}

// A test process killed with its daemon running (a crash, a ctest timeout) cannot clean up; the
// next DockerDaemon must.
TEST(DockerDaemonTest, CleansUpAfterAKilledRun)
{
  auto sockets_before = shim_sockets();
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(fds[0]);
    std::string report = "error\n";
    try {
      // Never destroyed: the child dies with SIGKILL below.
      auto* daemon = new DockerDaemon;
      auto container = daemon->run("orphan", {"--cgroup-parent=/kubepods/pod-orphan"},
                                   daemon->burner_image(), {"burner_r1", "600"});
      report = daemon->work_dir() + " " + std::to_string(daemon->dockerd_pid()) + " " +
               std::to_string(container.pid) + " " + container.id + "\n";
    } catch (const std::exception& e) {
      report = std::string("error ") + e.what() + "\n";
    }
    (void)!::write(fds[1], report.data(), report.size());
    ::pause();
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string report;
  char buffer[512];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) {
    report.append(buffer, static_cast<size_t>(n));
    if (report.ends_with('\n'))
      break;
  }
  ::close(fds[0]);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);

  std::istringstream in(report);
  std::string work_dir;
  pid_t dockerd = -1;
  pid_t container_pid = -1;
  std::string id;
  in >> work_dir >> dockerd >> container_pid >> id;
  ASSERT_TRUE(fs::is_directory(work_dir)) << report;
  ASSERT_TRUE(process_alive(dockerd));
  ASSERT_TRUE(process_alive(container_pid));

  Stopwatch watch;
  {
    DockerDaemon daemon;
    watch.lap("start with stale cleanup");
    EXPECT_FALSE(process_alive(dockerd));
    EXPECT_FALSE(process_alive(container_pid));
    EXPECT_EQ(processes_mentioning(work_dir), std::vector<pid_t>{});
    EXPECT_FALSE(fs::exists(work_dir));
    EXPECT_EQ(read_text("/proc/self/mountinfo").find(work_dir + "/"), std::string::npos);
    for (const auto& mount : cgroup_mount_points())
      EXPECT_FALSE(fs::exists(mount + "/kubepods/pod-orphan")) << mount;
  }
  EXPECT_EQ(added(sockets_before, shim_sockets()), std::vector<std::string>{});
}

// The processes whose parent is pid.
std::vector<pid_t> children_of(pid_t pid)
{
  std::vector<pid_t> children;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") == std::string::npos &&
        parent_pid(std::stoi(name)) == pid)
      children.push_back(std::stoi(name));
  }
  return children;
}

// The file paths a process has mapped, from /proc/<pid>/maps.
std::set<std::string> mapped_files(pid_t pid)
{
  std::set<std::string> files;
  std::istringstream lines(read_text("/proc/" + std::to_string(pid) + "/maps"));
  for (std::string line; std::getline(lines, line);) {
    auto slash = line.find('/');
    if (slash != std::string::npos)
      files.insert(line.substr(slash));
  }
  return files;
}

const std::vector<std::string> kJavaBurner{
    "java", "-XX:+PreserveFramePointer", "-cp", "/app", "Burner", "30"};

// Checks that pid is Burner's JVM running on the image's own runtime of that version, not on
// anything of the host's.
void expect_image_jvm(pid_t pid, const std::string& version_prefix)
{
  std::string proc = "/proc/" + std::to_string(pid);
  EXPECT_EQ(comm(pid), "java");
  EXPECT_EQ(command_line(pid), kJavaBurner);

  std::string libjvm = std::string(kContainerJavaHome) + "/lib/server/libjvm.so";
  EXPECT_TRUE(mapped_files(pid).contains(libjvm)) << read_text(proc + "/maps");
  for (const auto& file : mapped_files(pid)) {
    if (file.find("libjvm") != std::string::npos) {
      EXPECT_EQ(file, libjvm);
    }
  }
  EXPECT_FALSE(fs::exists(libjvm)) << "the host has " << libjvm << ": the test proves nothing";
  EXPECT_TRUE(fs::exists(proc + "/root" + libjvm));
  EXPECT_NE(read_text(proc + "/root" + std::string(kContainerJavaHome) + "/release")
                .find("JAVA_VERSION=\"" + version_prefix),
            std::string::npos);

  // /tmp is the image's own directory, world-writable and sticky, not a tmpfs.
  struct stat tmp {};
  ASSERT_EQ(::stat((proc + "/root/tmp").c_str(), &tmp), 0);
  EXPECT_EQ(tmp.st_mode & 07777, 01777u);
  EXPECT_EQ(read_text(proc + "/mountinfo").find(" /tmp "), std::string::npos);
}

TEST(DockerJavaImageTest, Jdk17RunsBurnerOnItsOwnRuntime)
{
  Stopwatch watch;
  DockerDaemon& daemon = DockerDaemon::shared();
  ContainersRemovedAtEnd containers_removed(daemon);
  watch.lap("dockerd start, or the program's shared one");
  std::string image = daemon.java_image(JavaVersion::kJdk17);
  watch.lap("JDK 17 image build, unless an earlier test built it");
  EXPECT_EQ(daemon.java_image(JavaVersion::kJdk17), image);
  watch.lap("JDK 17 image again (cached)");
  std::printf("[  SIZE    ] %s: %s bytes\n", image.c_str(),
              daemon.docker({"image", "inspect", "-f", "{{.Size}}", image}).c_str());
  auto container = daemon.run("jdk17", {}, image, kJavaBurner);
  daemon.wait_for_output("jdk17", "burner ready");
  watch.lap("run until burner ready");

  expect_image_jvm(container.pid, "17.");
  EXPECT_EQ(status_field(container.pid, "NSpid").back(), "1");
}

TEST(DockerJavaImageTest, Jdk25RunsBurnerOnItsOwnRuntime)
{
  if (!jdk25_available())
    GTEST_SKIP() << host_jdk_home(JavaVersion::kJdk25) << " is missing or cannot jlink";
  Stopwatch watch;
  DockerDaemon& daemon = DockerDaemon::shared();
  ContainersRemovedAtEnd containers_removed(daemon);
  watch.lap("dockerd start, or the program's shared one");
  std::string image = daemon.java_image(JavaVersion::kJdk25);
  watch.lap("JDK 25 image build, unless an earlier test built it");
  std::printf("[  SIZE    ] %s: %s bytes\n", image.c_str(),
              daemon.docker({"image", "inspect", "-f", "{{.Size}}", image}).c_str());
  auto container = daemon.run("jdk25", {}, image, kJavaBurner);
  daemon.wait_for_output("jdk25", "burner ready");
  watch.lap("run until burner ready");

  expect_image_jvm(container.pid, "25.");
  EXPECT_EQ(status_field(container.pid, "NSpid").back(), "1");
}

TEST(DockerJavaImageTest, RunsAsTheNonRootUser)
{
  DockerDaemon& daemon = DockerDaemon::shared();
  ContainersRemovedAtEnd containers_removed(daemon);
  auto container = daemon.run("app", {"--user", std::to_string(kContainerAppUid)},
                              daemon.java_image(JavaVersion::kJdk17), kJavaBurner);
  daemon.wait_for_output("app", "burner ready");

  expect_image_jvm(container.pid, "17.");
  std::string uid = std::to_string(kContainerAppUid);
  EXPECT_EQ(status_field(container.pid, "Uid"), (std::vector<std::string>{uid, uid, uid, uid}));
  // The JVM names its perf data directory after the user it finds in the image's /etc/passwd.
  std::string perf_data = "/proc/" + std::to_string(container.pid) + "/root/tmp/hsperfdata_app";
  struct stat info {};
  ASSERT_EQ(::stat(perf_data.c_str(), &info), 0) << perf_data;
  EXPECT_EQ(info.st_uid, static_cast<uid_t>(kContainerAppUid));
}

TEST(DockerJavaImageTest, InitMakesTheJvmAnotherProcessThanPid1)
{
  DockerDaemon& daemon = DockerDaemon::shared();
  ContainersRemovedAtEnd containers_removed(daemon);
  auto container =
      daemon.run("init", {"--init"}, daemon.java_image(JavaVersion::kJdk17), kJavaBurner);
  daemon.wait_for_output("init", "burner ready");

  // The container's main process is Docker's init (tini); the JVM is its child.
  EXPECT_EQ(comm(container.pid), "docker-init");
  EXPECT_EQ(status_field(container.pid, "NSpid").back(), "1");
  auto children = children_of(container.pid);
  ASSERT_EQ(children.size(), 1u);
  pid_t java = children[0];
  expect_image_jvm(java, "17.");
  auto nspid = status_field(java, "NSpid");
  ASSERT_EQ(nspid.size(), 2u);
  EXPECT_EQ(nspid[0], std::to_string(java));
  EXPECT_NE(nspid[1], "1");
  std::printf("[  NSPID   ] JVM under --init: host pid %s, namespace pid %s\n", nspid[0].c_str(),
              nspid[1].c_str());
}

TEST(PodmanRuntimeTest, BurnerContainerIsARealContainer)
{
  auto host_before = podman_host_paths();
  Stopwatch watch;
  PodmanRuntime podman;
  watch.lap("podman setup");
  std::string image = podman.burner_image();
  watch.lap("podman burner image build");
  auto container = podman.run("real", {}, image, {"burner_a", "60"});
  watch.lap("podman run");

  EXPECT_EQ(container.name, "real");
  EXPECT_TRUE(is_hex_id(container.id)) << container.id;
  EXPECT_EQ(comm(container.pid), "burner_a");

  // Its own PID namespace, in which it is the first process.
  auto nspid = status_field(container.pid, "NSpid");
  ASSERT_EQ(nspid.size(), 2u);
  EXPECT_EQ(nspid[0], std::to_string(container.pid));
  EXPECT_NE(nspid[1], std::to_string(container.pid));
  std::string proc = "/proc/" + std::to_string(container.pid);
  EXPECT_NE(inode(proc + "/ns/pid"), inode("/proc/self/ns/pid"));
  EXPECT_NE(inode(proc + "/ns/mnt"), inode("/proc/self/ns/mnt"));

  // podman's cgroupfs path, in cgroup2 and (on hybrid hosts) in every v1 hierarchy.
  std::string cgroup = "/libpod_parent/libpod-" + container.id;
  EXPECT_EQ(container.cgroup2_path, cgroup2_mount() + cgroup);
  EXPECT_TRUE(fs::is_directory(container.cgroup2_path));
  EXPECT_NE(read_text(container.cgroup2_path + "/cgroup.procs").find(std::to_string(container.pid)),
            std::string::npos);
  std::istringstream lines(read_text(proc + "/cgroup"));
  for (std::string line; std::getline(lines, line);)
    EXPECT_TRUE(line.ends_with(":" + cgroup)) << line;

  // Its conmon, which flamebpf reads the name from, is its parent, runs in our PID namespace and
  // names the container on its command line.
  pid_t conmon = parent_pid(container.pid);
  EXPECT_EQ(comm(conmon), "conmon");
  EXPECT_EQ(inode("/proc/" + std::to_string(conmon) + "/ns/pid"), inode("/proc/self/ns/pid"));
  auto args = command_line(conmon);
  EXPECT_EQ(option_value(args, "-n"), "real");
  EXPECT_EQ(option_value(args, "-c"), container.id);
  // runc, with its state in the work directory.
  EXPECT_TRUE(option_value(args, "-r").ends_with("/runc")) << option_value(args, "-r");
  EXPECT_TRUE(fs::exists(podman.work_dir() + "/runc/" + container.id));

  // The image is not the host: the workload runs from the container's overlay root.
  EXPECT_TRUE(fs::exists(proc + "/root/usr/bin/burner_k8s"));
  EXPECT_FALSE(fs::exists("/usr/bin/burner_k8s"));
  EXPECT_EQ(created(host_before), std::vector<std::string>{});
}

TEST(PodmanRuntimeTest, RemoveEndsTheContainer)
{
  PodmanRuntime podman;
  auto container = podman.run("short", {}, podman.burner_image(), {"burner_b", "60"});
  pid_t conmon = parent_pid(container.pid);
  ASSERT_TRUE(process_alive(container.pid));
  ASSERT_EQ(comm(conmon), "conmon");
  Stopwatch watch;
  podman.remove("short");
  watch.lap("podman rm -f");
  EXPECT_FALSE(process_alive(container.pid));
  EXPECT_FALSE(fs::exists(container.cgroup2_path));
  EXPECT_EQ(podman.podman({"ps", "-aq"}), "");
  // conmon may still run its exit command for a moment.
  EXPECT_TRUE(wait_until([&] { return !process_alive(conmon); }, std::chrono::seconds(5),
                         "conmon " + std::to_string(conmon) + " to exit"));
}

TEST(PodmanRuntimeTest, DestructionLeavesNothingBehind)
{
  // Only what did not exist before must be gone after: another podman may share /libpod_parent.
  auto cgroups_before = top_level_cgroups("libpod_parent");
  cgroups_before.merge(top_level_cgroups("kubepods"));
  std::map<std::string, bool> conmon_before;
  for (const auto& mount : cgroup_mount_points())
    conmon_before[mount + "/libpod_parent/conmon"] = fs::exists(mount + "/libpod_parent/conmon");
  auto host_before = podman_host_paths();
  std::string parent = "/kubepods/besteffort/pod" + random_uuid();
  std::string work_dir;
  std::vector<Container> containers;
  std::vector<pid_t> conmons;
  Stopwatch watch;
  {
    PodmanRuntime podman;
    work_dir = podman.work_dir();
    std::string image = podman.burner_image();
    containers.push_back(podman.run("plain", {}, image, {"burner_c", "60"}));
    containers.push_back(podman.run("pod", {"--cgroup-parent", parent}, image, {"burner_d", "60"}));
    for (const auto& container : containers)
      conmons.push_back(parent_pid(container.pid));
    // Left running: the destructor must remove them.
    ASSERT_TRUE(fs::is_directory(work_dir));
    ASSERT_NE(read_text("/proc/self/mountinfo").find(work_dir + "/"), std::string::npos);
    EXPECT_EQ(containers[1].cgroup2_path, cgroup2_mount() + parent + "/libpod-" + containers[1].id);
    watch.lap("podman build, run two");
  }
  watch.lap("podman cleanup");

  EXPECT_EQ(processes_mentioning(work_dir), std::vector<pid_t>{});
  for (size_t i = 0; i < containers.size(); ++i) {
    EXPECT_FALSE(process_alive(containers[i].pid)) << containers[i].name;
    EXPECT_FALSE(process_alive(conmons[i])) << "conmon of " << containers[i].name;
  }
  EXPECT_FALSE(fs::exists(work_dir));
  EXPECT_EQ(read_text("/proc/self/mountinfo").find(work_dir), std::string::npos);
  for (const auto& mount : cgroup_mount_points()) {
    for (const auto& container : containers) {
      EXPECT_FALSE(fs::exists(mount + "/libpod_parent/libpod-" + container.id));
      EXPECT_FALSE(fs::exists(mount + parent + "/libpod-" + container.id));
    }
    EXPECT_FALSE(fs::exists(mount + parent));
  }
  cgroups_before.merge(conmon_before);
  for (const auto& [dir, existed] : cgroups_before)
    EXPECT_TRUE(existed || !fs::exists(dir)) << dir << " is left behind";
  EXPECT_EQ(created(host_before), std::vector<std::string>{});
}

// A test process killed while its containers run cannot clean up; the next PodmanRuntime must.
TEST(PodmanRuntimeTest, CleansUpAfterAKilledRun)
{
  auto host_before = podman_host_paths();
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(fds[0]);
    std::string report = "error\n";
    try {
      // Never destroyed: the child dies with SIGKILL below.
      auto* podman = new PodmanRuntime;
      auto container = podman->run("orphan", {"--cgroup-parent=/kubepods/pod-podman-orphan"},
                                   podman->burner_image(), {"burner_r1", "600"});
      report = podman->work_dir() + " " + std::to_string(parent_pid(container.pid)) + " " +
               std::to_string(container.pid) + " " + container.id + "\n";
    } catch (const std::exception& e) {
      report = std::string("error ") + e.what() + "\n";
    }
    (void)!::write(fds[1], report.data(), report.size());
    ::pause();
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string report;
  char buffer[512];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) {
    report.append(buffer, static_cast<size_t>(n));
    if (report.ends_with('\n'))
      break;
  }
  ::close(fds[0]);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);

  std::istringstream in(report);
  std::string work_dir;
  pid_t conmon = -1;
  pid_t container_pid = -1;
  std::string id;
  in >> work_dir >> conmon >> container_pid >> id;
  ASSERT_TRUE(fs::is_directory(work_dir)) << report;
  ASSERT_TRUE(process_alive(conmon));
  ASSERT_EQ(comm(conmon), "conmon");
  ASSERT_TRUE(process_alive(container_pid));

  Stopwatch watch;
  {
    PodmanRuntime podman;
    watch.lap("podman setup with stale cleanup");
    EXPECT_FALSE(process_alive(conmon));
    EXPECT_FALSE(process_alive(container_pid));
    EXPECT_EQ(processes_mentioning(work_dir), std::vector<pid_t>{});
    EXPECT_FALSE(fs::exists(work_dir));
    EXPECT_EQ(read_text("/proc/self/mountinfo").find(work_dir + "/"), std::string::npos);
    for (const auto& mount : cgroup_mount_points()) {
      EXPECT_FALSE(fs::exists(mount + "/kubepods/pod-podman-orphan")) << mount;
      EXPECT_FALSE(fs::exists(mount + "/libpod_parent/libpod-" + id)) << mount;
    }
  }
  EXPECT_EQ(created(host_before), std::vector<std::string>{});
}

// The burner image holds the host's libc, and no debug file: its local functions (start_thread)
// are named from the host's libc6-dbg, found by build ID after the container's own root.
TEST(ContainerDebugFiles, HostsDebugFileNamesTheContainersLibc)
{
  ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
  DockerDaemon& daemon = DockerDaemon::shared();
  ContainersRemovedAtEnd containers_removed(daemon);
  auto container = daemon.run("debug-host", {}, daemon.burner_image(),
                              {"burner_a", "--late-thread", "0.5", "30"});
  std::string proc_root = "/proc/" + std::to_string(container.pid) + "/root";
  ASSERT_FALSE(fs::exists(proc_root + "/usr/lib/debug"));
  TempDir dir("/var/tmp");
  std::string out = dir.path().string() + "/out.folded";
  auto run = run_flamebpf({"--cgroup", "debug-host", "-d", "3", "-o", out});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto folded = read_folded(out);
  auto roots = late_thread_roots(folded);
  ASSERT_GT(roots.thread, 100u) << hottest_stacks(folded);
  EXPECT_GE(roots.start_thread * 100, roots.thread * 95) << hottest_stacks(folded);
  std::printf("[ FIGURES  ] %llu of %llu samples of the container's thread reach start_thread\n",
              static_cast<unsigned long long>(roots.start_thread),
              static_cast<unsigned long long>(roots.thread));
}

} // namespace
} // namespace flamebpf::testing
