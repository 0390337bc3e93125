// Real containers for the integration tests: a private dockerd (Debian's docker.io) or a private
// podman store (podman with runc) per test program, shared by its tests, images built locally
// once per program (no registry) holding
// the burner workload or a JVM with tests/progs/Burner.java, and cleanup that leaves nothing
// behind on the host, even after an earlier test run was killed.
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <utility>
#include <vector>

namespace flamebpf::testing {

// The names under which burner_image() installs the burner workload (/usr/bin/<name>), so that
// each container's process has a comm of its own.
inline constexpr std::array<std::string_view, 8> kBurnerNames{
    "burner_a",   "burner_b",   "burner_c",  "burner_d",
    "burner_k8s", "burner_sub", "burner_r1", "burner_r2"};

// Every daemon's work directory is this prefix plus a mkdtemp suffix.
inline constexpr std::string_view kDockerWorkDirPrefix = "/var/tmp/flamebpf-dockerd.";
// Every PodmanRuntime's work directory is this prefix plus a mkdtemp suffix.
inline constexpr std::string_view kPodmanWorkDirPrefix = "/var/tmp/flamebpf-podman.";
// Every CriContainerd's work directory is this prefix plus a mkdtemp suffix.
inline constexpr std::string_view kCriWorkDirPrefix = "/var/tmp/flamebpf-containerd.";

// The JDKs DockerDaemon::java_image() packages: the host's /usr/lib/jvm/java-17-openjdk-amd64
// (Debian's, with jmods) and /usr/lib/jvm/temurin-25-jdk-amd64 (Temurin's, linked from its
// run-time image).
enum class JavaVersion { kJdk17, kJdk25 };

// What java_image() installs besides the Java runtime and the application.
enum class JavaImageTools {
  kShellSleepAndCat, // /bin/sh, /bin/sleep and /bin/cat, for tests that run them in the container
  kNone,             // nothing, as a distroless image: no shell to run anything in it with
};

// Where java_image() puts the Java runtime (the eclipse-temurin images' layout).
inline constexpr std::string_view kContainerJavaHome = "/opt/java/openjdk";
// Where java_image() puts Burner.class (tests/progs/Burner.java), the image's working directory.
inline constexpr std::string_view kContainerAppDir = "/app";
// The non-root user of java_image(), for `--user 1000`: app, uid and gid 1000, home /home/app.
inline constexpr int kContainerAppUid = 1000;

// The host JDK java_image(version) packages.
std::string host_jdk_home(JavaVersion version);

// True if the host has the JDK 25 that java_image(JavaVersion::kJdk25) needs; tests skip without.
bool jdk25_available();

// A running container, as ContainerRuntime::run() returns it.
struct Container {
  std::string name;         // the --name it was run with
  std::string id;           // the 64-hex container id
  pid_t pid = 0;            // host pid of the container's main process
  std::string cgroup2_path; // absolute cgroup2 directory of that process, e.g.
                            // /sys/fs/cgroup/unified/docker/<id> or
                            // /sys/fs/cgroup/unified/libpod_parent/libpod-<id>
};

// What DockerDaemon and PodmanRuntime share: a work directory of their own, with a record of what
// needs cleaning up, and containers run and removed through a client that speaks Docker's
// command line (run, inspect, logs, rm).
class ContainerRuntime {
public:
  using Container = ::flamebpf::testing::Container;

  ContainerRuntime(const ContainerRuntime&) = delete;
  ContainerRuntime& operator=(const ContainerRuntime&) = delete;

  // The work directory holding the runtime's state, configuration and logs.
  const std::string& work_dir() const { return work_dir_; }

  // Runs `<client> run -d --pull=never --name name --network=none <the runtime's own run
  // options> options... image command...` and waits until the container's main process runs.
  // Throws std::runtime_error if it does not start or exits at once (with its logs).
  Container run(const std::string& name,
                const std::vector<std::string>& options,
                const std::string& image,
                const std::vector<std::string>& command);

  // Removes the container (`rm` with the runtime's remove options) and waits until it and its
  // main process are gone.
  void remove(const std::string& name);

  // Removes every container of the runtime, those run() started and any other, and waits until
  // they are gone. Images stay, and so do the cgroup parents containers were given (until the
  // runtime stops). Each test that uses a runtime its program shares (shared()) calls this when it
  // ends, so that the next test starts with none of its containers.
  void remove_containers();

protected:
  // What tells the runtimes apart in run() and remove().
  struct Traits {
    std::string default_cgroup_parent;       // where containers go without --cgroup-parent
    std::vector<std::string> run_options;    // added to every run
    std::vector<std::string> remove_options; // after rm, before the name
    // A cgroup below the parent that other runtimes share (podman's conmon), or "".
    std::string shared_cgroup;
  };

  ContainerRuntime(std::string work_dir, Traits traits);
  virtual ~ContainerRuntime() = default;

  // Runs the runtime's client with args and returns its trimmed stdout; throws
  // std::runtime_error, with stderr, if it fails.
  virtual std::string client(const std::vector<std::string>& args) = 0;
  // Appends a line to the work directory's record of what needs cleaning up.
  void record(const std::string& kind, const std::string& value);

  std::string work_dir_;

private:
  Traits traits_;
  std::vector<std::pair<std::string, pid_t>> container_pids_; // name -> main process
};

// A private dockerd for one test process. It has its own data root, exec root, socket, pidfile and
// key file in a fresh work directory, and touches neither the host's network (no bridge, no
// iptables rules) nor any other dockerd.
//
// Cleanup: the constructor first removes what killed test runs left behind (their dockerd,
// containerd, shims and containers, mounts, cgroup directories and work directories); the
// destructor removes what this daemon made. Leftovers are found from the work directory alone
// (its owner file, its record of cgroups and host directories, and every process whose command
// line names it), so a crash at any point can be cleaned up by the next run. Several daemons may
// run at once, in one test process or in several; each leaves the others' directories alone.
class DockerDaemon : public ContainerRuntime {
public:
  // The test program's own daemon, started when first asked for and stopped when the program
  // exits: starting dockerd and building images costs seconds, which its tests pay once. A test
  // that uses it removes its containers when it ends (remove_containers()).
  static DockerDaemon& shared();

  // Cleans up after killed test runs, then starts dockerd and waits until it answers. Throws
  // std::runtime_error, with the tail of dockerd's log, if it does not come up within about 20
  // seconds.
  DockerDaemon();
  // Removes every container and image this daemon made, stops dockerd and its containerd by pid
  // and waits for them, kills whatever still names the work directory, unmounts what is left
  // below it, removes the cgroup directories of its containers (and the parents Docker created
  // for them, if empty) in every hierarchy, and deletes the work directory. Never throws;
  // problems are printed to stderr.
  ~DockerDaemon();
  DockerDaemon(const DockerDaemon&) = delete;
  DockerDaemon& operator=(const DockerDaemon&) = delete;

  // The --data-root directory.
  const std::string& data_root() const { return data_root_; }
  // The daemon's socket, for a docker client of the test's own (DOCKER_HOST=unix://<socket>).
  const std::string& socket() const { return socket_; }
  // The pid of dockerd, a child of this process.
  pid_t dockerd_pid() const { return dockerd_pid_; }
  // The pid of the containerd dockerd started, or -1 if it could not be found.
  pid_t containerd_pid() const { return containerd_pid_; }

  // Runs the docker client against this daemon with args and returns its trimmed stdout. Throws
  // std::runtime_error, with stderr, if the client exits non-zero or hangs for a minute.
  std::string docker(const std::vector<std::string>& args);

  // Builds (once per daemon) and returns the tag of an image holding the burner workload as
  // /usr/bin/<name> for each name in kBurnerNames, the shared libraries it needs, /bin/sh and
  // /bin/sleep.
  std::string burner_image();

  // Builds (once per daemon, version and tools) and returns the tag of an image holding a Java
  // runtime jlink'ed from the host JDK (modules java.base, java.management, jdk.management,
  // jdk.attach, jdk.jcmd) at kContainerJavaHome, the host libraries it needs, the tools (/bin/sh,
  // /bin/sleep and /bin/cat unless JavaImageTools::kNone), Burner.class in kContainerAppDir
  // (compiled from tests/progs/Burner.java by the host's JDK 17 javac --release 17), a writable
  // /tmp (mode 1777, in the image: add --tmpfs for a private one) and the users root and app
  // (kContainerAppUid). PATH starts with kContainerJavaHome/bin, JAVA_HOME is set and the working
  // directory is kContainerAppDir, so `java -XX:+PreserveFramePointer -cp /app Burner 30` runs it.
  // Throws std::runtime_error if the JDK is missing or javac or jlink fail.
  std::string java_image(JavaVersion version,
                         JavaImageTools tools = JavaImageTools::kShellSleepAndCat);

  // Waits until the container's stdout (docker logs) contains text, such as Burner's "burner
  // ready". Throws std::runtime_error, with the container's output, if the container stops or
  // the text does not appear within timeout.
  void wait_for_output(const std::string& name,
                       std::string_view text,
                       std::chrono::milliseconds timeout = std::chrono::seconds(60));

private:
  std::string client(const std::vector<std::string>& args) override { return docker(args); }
  // Runs the docker client with args, its stdin reading input (-1: /dev/null); as docker().
  std::string run_client(const std::vector<std::string>& args, int input);
  // Fills a fresh root directory with build, then `docker import`s it as tag with the given
  // Dockerfile instructions (--change).
  void import_image(const std::string& tag,
                    const std::vector<std::string>& changes,
                    const std::function<void(const std::string& rootfs)>& build);
  // The destructor's work; noexcept so the constructor can use it on failure too.
  void shut_down() noexcept;

  std::string data_root_;
  std::string exec_root_;
  std::string socket_;
  std::string client_;
  std::vector<std::string> client_environment_;
  pid_t dockerd_pid_ = -1;
  pid_t containerd_pid_ = -1;
  std::string burner_image_;
  std::map<std::pair<JavaVersion, JavaImageTools>, std::string> java_images_;
};

// A private podman (Debian's podman 4.3) for one test process: its own storage root, run root,
// temporary directory, runc state directory and configuration in a fresh work directory, so that
// it touches neither the host's podman state (/var/lib/containers, /run/containers, /run/libpod,
// /run/runc, /dev/shm/libpod_lock, /etc/containers/networks) nor another PodmanRuntime's. Every
// command runs as `podman --root ... --runroot ... --runtime <runc> --cgroup-manager cgroupfs
// --events-backend file --tmpdir ... --storage-driver overlay`, where <runc> runs runc with its
// state in the work directory. Containers run with runc (crun refuses hybrid cgroup hosts),
// without network, and with explicit rlimits (podman's defaults need CAP_SYS_RESOURCE). A
// container's cgroup is /libpod_parent/libpod-<id> in every hierarchy, and its conmon runs as
// `conmon ... -c <id> ... -n <name> ...` in /libpod_parent/conmon. For a private /tmp, run with
// `--tmpfs /tmp:rw,mode=1777,notmpcopyup`: without notmpcopyup podman copies the image's /tmp
// into it.
//
// Cleanup works as DockerDaemon's does: the constructor first removes what killed test runs left
// behind (their conmons, containers, podman and runc processes, mounts, cgroup directories and
// work directories), the destructor removes what this one made, and both work from the work
// directory alone.
class PodmanRuntime : public ContainerRuntime {
public:
  // The test program's own runtime, made when first asked for and removed when the program exits;
  // as DockerDaemon::shared().
  static PodmanRuntime& shared();

  // Cleans up after killed test runs, then prepares the work directory and configuration. Throws
  // std::runtime_error if podman or runc is missing.
  PodmanRuntime();
  // Removes every container (podman rm -f) and image this runtime made, waits for their conmons
  // and cleanup processes, kills whatever still names the work directory, unmounts what is left
  // below it, removes its containers' cgroup directories in every hierarchy and, if empty,
  // /libpod_parent/conmon and /libpod_parent (or the --cgroup-parent chain), and deletes the work
  // directory. Never throws; problems are printed to stderr.
  ~PodmanRuntime();
  PodmanRuntime(const PodmanRuntime&) = delete;
  PodmanRuntime& operator=(const PodmanRuntime&) = delete;

  // The --root directory (podman's image and container storage).
  const std::string& storage_root() const { return storage_root_; }

  // Runs podman with the global options above and args; returns its trimmed stdout. Throws
  // std::runtime_error, with stderr, if podman exits non-zero or hangs for a minute.
  std::string podman(const std::vector<std::string>& args);

  // Builds (once per runtime) and returns the name of an image holding the same files as
  // DockerDaemon::burner_image()'s: the burner workload as /usr/bin/<name> for each name in
  // kBurnerNames, the shared libraries it needs, /bin/sh and /bin/sleep.
  std::string burner_image();

private:
  std::string client(const std::vector<std::string>& args) override { return podman(args); }
  // The destructor's work; noexcept so the constructor can use it on failure too.
  void shut_down() noexcept;

  std::string storage_root_;
  std::string podman_;
  std::vector<std::string> global_options_;
  std::vector<std::string> environment_;
  std::string burner_image_;
};

// A private containerd (Debian's containerd 1.6) for one test process, making containers as its
// CRI plugin makes them for the kubelet: in namespace k8s.io, each in the cgroup
// /kubepods/burstable/pod<uid>/<id>, with the io.kubernetes.cri.* annotations in its spec, and a
// sandbox (pause) container per pod. Its root, state, sockets and configuration are in a fresh
// work directory; the containers run the burner image's files (`ctr run --rootfs`), with no
// image store. Cleanup works as DockerDaemon's does, from the work directory alone.
class CriContainerd {
public:
  // The test program's own containerd, started when first asked for and stopped when the program
  // exits; a test that uses it removes its pods when it ends (remove_pods()).
  static CriContainerd& shared();

  // Cleans up after killed test runs, then starts containerd and waits until it answers. Throws
  // std::runtime_error, with the tail of its log, if it does not come up within about 20 seconds.
  CriContainerd();
  // Removes every container, stops containerd and purges the work directory. Never throws.
  ~CriContainerd();
  CriContainerd(const CriContainerd&) = delete;
  CriContainerd& operator=(const CriContainerd&) = delete;

  struct Pod {
    std::string namespace_name;
    std::string name;
    std::string uid;
    std::string cgroup; // relative to the cgroup2 mount: /kubepods/burstable/pod<uid>
    // Set on every container of the pod, over the CRI plugin's own (to forge them).
    std::map<std::string, std::string> annotations;
  };

  // Creates a pod with a new UID and starts its sandbox (sleep).
  Pod start_pod(const std::string& namespace_name,
                const std::string& name,
                const std::map<std::string, std::string>& annotations = {});
  // Starts container_name (empty: the sandbox) in pod running command from the burner image's
  // files, with annotations over the pod's; waits until it runs in its cgroup.
  Container run(const Pod& pod,
                const std::string& container_name,
                const std::vector<std::string>& command,
                const std::map<std::string, std::string>& annotations = {});
  // Kills and deletes every container of the pod, then removes the pod's cgroup.
  void remove_pod(const Pod& pod);
  // remove_pod() for every pod started so far.
  void remove_pods();

  // Runs ctr against this containerd in namespace k8s.io; returns its trimmed stdout or throws.
  std::string ctr(const std::vector<std::string>& args);
  pid_t containerd_pid() const { return containerd_pid_; }

private:
  std::string burner_rootfs();
  void stop(const std::string& id, pid_t pid);
  void shut_down() noexcept;

  std::string work_dir_;
  std::string socket_;
  std::string state_;
  std::string ctr_;
  std::string burner_rootfs_;
  pid_t containerd_pid_ = -1;
  std::vector<std::pair<std::string, pid_t>> containers_; // id -> main process
};

// Held by a test that uses its program's shared runtime (DockerDaemon::shared(),
// PodmanRuntime::shared(), CriContainerd::shared()): when it goes, at the test's end, every
// container the test left is removed, so that the next test starts with none. A removal that fails
// fails the test.
class ContainersRemovedAtEnd {
public:
  explicit ContainersRemovedAtEnd(ContainerRuntime& runtime);
  explicit ContainersRemovedAtEnd(CriContainerd& containerd);
  ~ContainersRemovedAtEnd();
  ContainersRemovedAtEnd(const ContainersRemovedAtEnd&) = delete;
  ContainersRemovedAtEnd& operator=(const ContainersRemovedAtEnd&) = delete;

private:
  std::function<void()> remove_;
};

// Mount points of every cgroup hierarchy, v1 controllers and cgroup2, from /proc/self/mountinfo.
std::vector<std::string> cgroup_mount_points();

// True if pid exists and is not a zombie.
bool process_alive(pid_t pid);

// Processes other than this one whose command line names path or something below it.
std::vector<pid_t> processes_mentioning(const std::string& path);

} // namespace flamebpf::testing
