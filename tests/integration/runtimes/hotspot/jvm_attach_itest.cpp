// HotSpot's attach protocol against real JVMs in namespaces of their own, as in a container: a
// private mount namespace with its own tmpfs /tmp and a PID namespace where the JVM is PID 1.
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <memory>
#include <sched.h>
#include <stdexcept>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "common/procfs.h"
#include "harness.h"
#include "process.h"
#include "runtimes/hotspot/agent_installer.h"
#include "runtimes/hotspot/hotspot_attach.h"

namespace flamebpf::hotspot {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using flamebpf::testing::Child;
using flamebpf::testing::read_text;
using flamebpf::testing::TempDir;
using flamebpf::testing::wait_for_text;

constexpr auto kTimeout = 10s;

bool contains(const std::string& text, const std::string& part)
{
  return text.find(part) != std::string::npos;
}

double milliseconds_since(Clock::time_point start)
{
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Scratch directories live under /var/tmp: the JVMs get a /tmp of their own, so what they need from
// the host must live elsewhere. Readable by all, for the JVM in a user namespace.
const std::filesystem::path kScratchParent = "/var/tmp";
constexpr auto kReadableByAll = std::filesystem::perms(0755);

void write_text(const std::string& path, const std::string& text)
{
  std::ofstream(path) << text;
}

std::vector<unsigned char> read_bytes(const std::string& path)
{
  std::ifstream in(path, std::ios::binary);
  return std::vector<unsigned char>(std::istreambuf_iterator<char>(in),
                                    std::istreambuf_iterator<char>());
}

// The agent flamebpf ships, if it was built next to the flamebpf binary.
std::string project_agent()
{
#ifdef FLAMEBPF_AGENT_LIBRARY
  return FLAMEBPF_AGENT_LIBRARY;
#else
  auto build = std::filesystem::path(FLAMEBPF_BINARY).parent_path().parent_path();
  return (build / "jvm-agent" / "libflamebpf-agent.so").string();
#endif
}

// Built once: the Java workload and two tiny agents.
class Fixtures {
public:
  static Fixtures& get()
  {
    static Fixtures fixtures;
    return fixtures;
  }
  std::string classes() const { return dir_.path(); }
  bool have_agents() const { return have_agents_; }
  std::string agent(const std::string& name) const
  {
    return dir_.path().string() + "/lib" + name + ".so";
  }
  bool have_classes() const { return have_classes_; }

private:
  Fixtures()
  {
    write_text(dir_.path().string() + "/AttachTarget.java",
               "public class AttachTarget {\n"
               "  public static void main(String[] args) throws Exception {\n"
               "    System.out.println(\"ready\");\n"
               "    System.out.flush();\n"
               "    Thread.sleep(600_000);\n"
               "  }\n"
               "}\n");
    have_classes_ = compiles({"/usr/lib/jvm/java-17-openjdk-amd64/bin/javac", "-d", dir_.path(),
                              dir_.path() / "AttachTarget.java"});
    write_text(dir_.path().string() + "/ok.c",
               "#include <stdio.h>\n"
               "int Agent_OnAttach(void* vm, char* options, void* reserved) {\n"
               "  (void)vm; (void)reserved;\n"
               "  fprintf(stderr, \"itest agent attached: [%s]\\n\", options ? options : \"\");\n"
               "  return 0;\n"
               "}\n");
    write_text(dir_.path().string() + "/failing.c",
               "int Agent_OnAttach(void* vm, char* options, void* reserved) {\n"
               "  (void)vm; (void)options; (void)reserved;\n"
               "  return 7;\n"
               "}\n");
    have_agents_ = true;
    for (const char* name : {"ok", "failing"}) {
      have_agents_ = have_agents_ && compiles({"/usr/bin/cc", "-shared", "-fPIC", "-o", agent(name),
                                               dir_.path() / (std::string(name) + ".c")});
    }
    for (const auto& entry : std::filesystem::directory_iterator(dir_.path()))
      std::filesystem::permissions(entry.path(), std::filesystem::perms(0755));
  }

  // Whether the compiler command succeeds; its messages go to the test's output if not.
  static bool compiles(const std::vector<std::string>& command)
  {
    auto result = flamebpf::testing::run_process(command, {}, 120s);
    if (result.status != 0)
      std::fprintf(stderr, "%s failed: %s%s\n", command[0].c_str(), result.out.c_str(),
                   result.err.c_str());
    return result.status == 0;
  }

  TempDir dir_{kScratchParent, kReadableByAll};
  bool have_classes_ = false;
  bool have_agents_ = false;
};

std::string jdk_home(const std::string& version)
{
  return version == "17" ? "/usr/lib/jvm/java-17-openjdk-amd64"
                         : "/usr/lib/jvm/temurin-25-jdk-amd64";
}

// The JVM's pid once `launcher` (unshare or sh) has started it as its child.
pid_t find_java_child(pid_t launcher)
{
  pid_t found = -1;
  flamebpf::testing::poll_until(
      [&] {
        for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
          std::string name = entry.path().filename().string();
          if (name.find_first_not_of("0123456789") != std::string::npos)
            continue;
          std::string status = read_text(entry.path().string() + "/status");
          if (contains(status, "\nPPid:\t" + std::to_string(launcher) + "\n") &&
              status.starts_with("Name:\tjava\n"))
            found = std::stoi(name);
        }
        return found > 0;
      },
      10s);
  return found;
}

// A JVM started the way the brief of this test asks: unshare makes it PID 1 of a new PID
// namespace, in a private mount namespace with its own tmpfs on /tmp.
class NamespacedJvm {
public:
  // cwd: its working directory, if not the test's.
  NamespacedJvm(const std::string& jdk,
                const std::string& output,
                const std::string& tmp_options,
                const std::string& cwd = "")
  {
    std::string mount =
        "mount -t tmpfs " + (tmp_options.empty() ? "" : "-o " + tmp_options + " ") + "none /tmp";
    std::string command = mount + (cwd.empty() ? "" : " && cd " + cwd) + " && exec " + jdk +
                          "/bin/java -cp " + Fixtures::get().classes() + " AttachTarget";
    launcher_ = std::make_unique<Child>(
        std::vector<std::string>{"/usr/bin/unshare", "--mount", "--pid", "--fork", "--mount-proc",
                                 "--propagation", "private", "/bin/sh", "-c", command},
        "", output);
    pid_ = find_java_child(launcher_->pid());
  }
  ~NamespacedJvm()
  {
    // The namespace's init does not die with unshare: kill it, and let unshare reap it and exit.
    if (pid_ > 0 && ::kill(pid_, SIGKILL) == 0)
      launcher_->wait();
  }
  pid_t pid() const { return pid_; }

private:
  std::unique_ptr<Child> launcher_;
  pid_t pid_ = -1;
};

// A JVM as rootless and user-namespaced containers run one: root of a user namespace whose uids
// 0-65535 are the host's 100000-165535, PID 1 of its PID namespace, its own tmpfs /tmp (mounted
// inside the user namespace, so host root is an unmapped user there).
class UserNamespaceJvm {
public:
  static constexpr uint32_t kHostIdBase = 100000;

  UserNamespaceJvm(const std::string& jdk, const std::string& output)
  {
    int to_child[2];
    int from_child[2];
    if (::pipe2(to_child, O_CLOEXEC) != 0 || ::pipe2(from_child, O_CLOEXEC) != 0)
      throw std::runtime_error("pipe failed");
    int out = ::open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    std::string java = jdk + "/bin/java";
    std::string classes = Fixtures::get().classes();
    helper_ = ::fork();
    if (helper_ < 0)
      throw std::runtime_error("fork failed");
    if (helper_ == 0) {
      if (::unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID) != 0)
        ::_exit(120);
      char byte = 'u';
      if (::write(from_child[1], &byte, 1) != 1 || ::read(to_child[0], &byte, 1) != 1)
        ::_exit(121);
      // Mapped now: become the namespace's root, which keeps its capabilities across exec.
      if (::syscall(SYS_setresgid, 0, 0, 0) != 0 || ::syscall(SYS_setresuid, 0, 0, 0) != 0)
        ::_exit(122);
      pid_t init = ::fork();
      if (init == 0) {
        if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
            ::mount("none", "/tmp", "tmpfs", 0, nullptr) != 0 ||
            ::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
          ::_exit(123);
        ::dup2(out, 1);
        ::dup2(out, 2);
        const char* argv[] = {java.c_str(), "-cp", classes.c_str(), "AttachTarget", nullptr};
        ::execv(argv[0], const_cast<char**>(argv));
        ::_exit(127);
      }
      (void)!::write(from_child[1], &init, sizeof init);
      ::waitpid(init, nullptr, 0);
      ::_exit(0);
    }
    ::close(out);
    char byte = 0;
    if (::read(from_child[0], &byte, 1) != 1)
      throw std::runtime_error("user namespace helper failed");
    std::string map = "0 " + std::to_string(kHostIdBase) + " 65536";
    write_text("/proc/" + std::to_string(helper_) + "/uid_map", map);
    write_text("/proc/" + std::to_string(helper_) + "/gid_map", map);
    if (::write(to_child[1], &byte, 1) != 1 ||
        ::read(from_child[0], &pid_, sizeof pid_) != sizeof pid_)
      throw std::runtime_error("user namespace helper failed");
    for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]})
      ::close(fd);
  }
  ~UserNamespaceJvm()
  {
    // The helper reaps the JVM, then exits.
    if (pid_ <= 0 || ::kill(pid_, SIGKILL) != 0)
      ::kill(helper_, SIGKILL);
    if (helper_ > 0)
      ::waitpid(helper_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }

private:
  pid_t helper_ = -1;
  pid_t pid_ = -1;
};

// Names of attach files (.java_pid*, .attach_pid*) in a directory.
std::vector<std::string> attach_files(const std::string& directory)
{
  std::vector<std::string> names;
  std::error_code ignored;
  for (const auto& entry : std::filesystem::directory_iterator(directory, ignored)) {
    std::string name = entry.path().filename().string();
    if (name.starts_with(".java_pid") || name.starts_with(".attach_pid"))
      names.push_back(name);
  }
  return names;
}

// Attach files of one JVM in the host's /tmp: there must never be any.
std::vector<std::string> host_tmp_files_for(const AttachTarget& target)
{
  std::vector<std::string> found;
  for (uint32_t pid : {target.ns_pid, target.host_pid})
    for (const char* prefix : {"/tmp/.java_pid", "/tmp/.attach_pid"}) {
      std::string path = prefix + std::to_string(pid);
      if (std::filesystem::exists(std::filesystem::symlink_status(path)))
        found.push_back(path);
    }
  return found;
}

class JvmAttach : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override
  {
    ASSERT_EQ(::geteuid(), 0u) << "the JVM attach tests need root (namespaces, mounts)";
    if (!std::filesystem::exists(jdk() + "/bin/java"))
      GTEST_SKIP() << "JDK " << GetParam() << " is not installed at " << jdk();
    ASSERT_TRUE(Fixtures::get().have_classes()) << "javac failed";
    output_ = scratch_.path().string() + "/jvm.out";
  }

  std::string jdk() const { return jdk_home(GetParam()); }

  // Starts a namespaced JVM and waits until it runs main().
  std::unique_ptr<NamespacedJvm> start(const std::string& tmp_options = "",
                                       const std::string& cwd = "")
  {
    auto jvm = std::make_unique<NamespacedJvm>(jdk(), output_, tmp_options, cwd);
    EXPECT_GT(jvm->pid(), 0) << "no java process appeared";
    EXPECT_TRUE(wait_for_text(output_, "ready", 30)) << read_text(output_);
    return jvm;
  }

  AttachTarget target_of(pid_t pid)
  {
    auto target = attach_target_of(static_cast<uint32_t>(pid));
    EXPECT_TRUE(target.has_value()) << target.error().message;
    return target.value_or(AttachTarget{});
  }

  TempDir scratch_{kScratchParent, kReadableByAll};
  std::string output_;
};

TEST_P(JvmAttach, JcmdStartsTheListenerThenReusesItsSocket)
{
  auto jvm = start();
  ASSERT_GT(jvm->pid(), 0);
  AttachTarget target = target_of(jvm->pid());
  ASSERT_EQ(target.ns_pid, 1u) << "the JVM should be PID 1 of its namespace";
  std::string jvm_tmp = target.process_path + "/root/tmp";
  std::string socket = jvm_tmp + "/.java_pid1";
  ASSERT_FALSE(std::filesystem::exists(socket)) << "the attach listener runs already";

  auto start_time = Clock::now();
  auto version = jcmd(target, "VM.version", kTimeout);
  double first_ms = milliseconds_since(start_time);
  ASSERT_TRUE(version.has_value()) << version.error().message;
  EXPECT_TRUE(contains(*version, "JDK " + GetParam() + ".")) << *version;
  struct stat first {};
  ASSERT_EQ(::stat(socket.c_str(), &first), 0) << "no socket in the JVM's /tmp";
  EXPECT_TRUE(S_ISSOCK(first.st_mode));

  start_time = Clock::now();
  auto flags = jcmd(target, "VM.flags", kTimeout);
  double flags_ms = milliseconds_since(start_time);
  ASSERT_TRUE(flags.has_value()) << flags.error().message;
  EXPECT_TRUE(contains(*flags, "-XX:")) << *flags;

  start_time = Clock::now();
  auto again = jcmd(target, "VM.version", kTimeout);
  double again_ms = milliseconds_since(start_time);
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_EQ(*again, *version);
  struct stat second {};
  ASSERT_EQ(::stat(socket.c_str(), &second), 0);
  EXPECT_EQ(second.st_ino, first.st_ino) << "the socket was recreated instead of reused";

  std::printf("[ attach ] JDK %s: first jcmd VM.version (trigger, SIGQUIT, socket, reply) %.2f ms; "
              "VM.flags on the existing socket %.2f ms; VM.version again %.2f ms\n",
              GetParam().c_str(), first_ms, flags_ms, again_ms);
  EXPECT_EQ(attach_files(jvm_tmp), std::vector<std::string>{".java_pid1"});
  EXPECT_TRUE(host_tmp_files_for(target).empty());
  // A SIGQUIT without the trigger would have printed a thread dump instead.
  EXPECT_FALSE(contains(read_text(output_), "Full thread dump")) << read_text(output_);

  auto unknown = jcmd(target, "No.such.command", kTimeout);
  ASSERT_FALSE(unknown.has_value());
  EXPECT_TRUE(contains(unknown.error().message, "Unknown diagnostic command"))
      << unknown.error().message;
}

TEST_P(JvmAttach, LoadsAgentsInstalledInItsTmp)
{
  if (!Fixtures::get().have_agents())
    GTEST_SKIP() << "no C compiler (cc) to build the test agents";
  auto jvm = start();
  ASSERT_GT(jvm->pid(), 0);
  AttachTarget target = target_of(jvm->pid());

  auto ok_library = read_bytes(Fixtures::get().agent("ok"));
  auto ok_path = install_agent(target, ok_library, agent_file_name(ok_library));
  ASSERT_TRUE(ok_path.has_value()) << ok_path.error().message;
  EXPECT_TRUE(ok_path->path.starts_with("/tmp/")) << ok_path->path;
  auto start_time = Clock::now();
  auto loaded = load_agent(target, ok_path->path, "interval=10ms,dir=/tmp", kTimeout);
  double load_ms = milliseconds_since(start_time);
  ASSERT_TRUE(loaded.has_value()) << loaded.error().message;
  EXPECT_TRUE(wait_for_text(output_, "itest agent attached: [interval=10ms,dir=/tmp]", 5))
      << read_text(output_);
  std::printf("[ attach ] JDK %s: load (listener not yet started) %.2f ms\n", GetParam().c_str(),
              load_ms);

  auto failing_library = read_bytes(Fixtures::get().agent("failing"));
  auto failing_path = install_agent(target, failing_library, agent_file_name(failing_library));
  ASSERT_TRUE(failing_path.has_value()) << failing_path.error().message;
  auto failed = load_agent(target, failing_path->path, "", kTimeout);
  ASSERT_FALSE(failed.has_value());
  EXPECT_TRUE(contains(failed.error().message, "Agent_OnAttach failed with return code 7"))
      << failed.error().message;

  auto missing = load_agent(target, "/tmp/libno-such-agent.so", "", kTimeout);
  ASSERT_FALSE(missing.has_value());
  EXPECT_TRUE(contains(missing.error().message, "was not loaded")) << missing.error().message;

  std::string agent = project_agent();
  if (!std::filesystem::exists(agent)) {
    std::printf("[ attach ] %s not built: the project agent is not loaded\n", agent.c_str());
  } else {
    auto library = read_bytes(agent);
    auto path = install_agent(target, library, agent_file_name(library));
    ASSERT_TRUE(path.has_value()) << path.error().message;
    auto project = load_agent(target, path->path, "", kTimeout);
    ASSERT_TRUE(project.has_value()) << project.error().message << "\n" << read_text(output_);
    // It keeps /tmp/perf-<pid>.map as the JVM sees both: its /tmp, its pid.
    std::string map = target.process_path + "/root/tmp/perf-1.map";
    EXPECT_TRUE(std::filesystem::exists(map)) << read_text(output_);
    // Loading it again is harmless: the first load keeps the map, the second adds nothing.
    auto size = std::filesystem::file_size(map);
    auto again = load_agent(target, path->path, "", kTimeout);
    ASSERT_TRUE(again.has_value()) << again.error().message;
    EXPECT_EQ(std::filesystem::file_size(map), size);
  }
  EXPECT_TRUE(attach_files(target.process_path + "/root/tmp") ==
              std::vector<std::string>{".java_pid1"});
  EXPECT_TRUE(host_tmp_files_for(target).empty());
}

TEST_P(JvmAttach, AgentGoesPastANoexecTmp)
{
  if (!Fixtures::get().have_agents())
    GTEST_SKIP() << "no C compiler (cc) to build the test agents";
  auto jvm = start("noexec,nosuid,nodev");
  ASSERT_GT(jvm->pid(), 0);
  AttachTarget target = target_of(jvm->pid());
  auto library = read_bytes(Fixtures::get().agent("ok"));
  auto path = install_agent(target, library, agent_file_name(library));
  ASSERT_TRUE(path.has_value()) << path.error().message;
  // This JVM shares the host's other directories: /var/tmp (or /dev/shm) is the host's.
  std::string installed = target.process_path + "/root" + path->path;
  struct Remove {
    std::string file;
    ~Remove() { std::filesystem::remove(file); }
  } remove{installed};
  EXPECT_FALSE(path->path.starts_with("/tmp/")) << path->path;
  std::printf("[ attach ] JDK %s with /tmp noexec: agent installed as %s\n", GetParam().c_str(),
              path->path.c_str());
  auto loaded = load_agent(target, path->path, "noexec", kTimeout);
  ASSERT_TRUE(loaded.has_value()) << loaded.error().message;
  EXPECT_TRUE(wait_for_text(output_, "itest agent attached: [noexec]", 5)) << read_text(output_);
}

// A hard link at /tmp/.attach_pid1 to another file: HotSpot would take it for a trigger (it is
// root's, as the JVM is), but flamebpf neither uses, changes nor removes it, and creates the
// trigger in the JVM's working directory, where HotSpot looks first.
TEST_P(JvmAttach, HardLinkAtTheTriggerIsLeftAloneAndTheWorkingDirectoryUsed)
{
  std::string cwd = scratch_.path().string() + "/cwd";
  std::filesystem::create_directories(cwd);
  auto jvm = start("", cwd);
  ASSERT_GT(jvm->pid(), 0);
  AttachTarget target = target_of(jvm->pid());
  std::string tmp = target.process_path + "/root/tmp";
  std::string secret = tmp + "/secret";
  write_text(secret, "secret\n");
  ASSERT_EQ(::chown(secret.c_str(), 1234, 1234), 0);
  ASSERT_EQ(::chmod(secret.c_str(), 0640), 0);
  ASSERT_EQ(::link(secret.c_str(), (tmp + "/.attach_pid1").c_str()), 0);

  auto version = jcmd(target, "VM.version", kTimeout);
  ASSERT_TRUE(version.has_value()) << version.error().message;
  EXPECT_TRUE(contains(*version, "JDK " + GetParam() + ".")) << *version;
  struct stat status {};
  ASSERT_EQ(::stat(secret.c_str(), &status), 0);
  EXPECT_EQ(status.st_uid, 1234u);
  EXPECT_EQ(status.st_gid, 1234u);
  EXPECT_EQ(status.st_mode & 07777, 0640u);
  EXPECT_EQ(status.st_nlink, 2u) << "the link was removed";
  EXPECT_EQ(read_text(secret), "secret\n");
  // The trigger flamebpf made in the working directory is gone again.
  EXPECT_TRUE(attach_files(cwd).empty());
  EXPECT_FALSE(contains(read_text(output_), "Full thread dump")) << read_text(output_);
}

std::string jdk_test_name(const ::testing::TestParamInfo<std::string>& param)
{
  return "JDK" + param.param;
}

INSTANTIATE_TEST_SUITE_P(Jdk, JvmAttach, ::testing::Values("17", "25"), jdk_test_name);

TEST(JvmAttachUserNamespace, ConnectsAsTheJvmsUserBecauseHostRootIsRefused)
{
  ASSERT_EQ(::geteuid(), 0u) << "the JVM attach tests need root (namespaces, mounts)";
  ASSERT_TRUE(Fixtures::get().have_classes()) << "javac failed";
  TempDir scratch(kScratchParent, kReadableByAll);
  std::string output = scratch.path().string() + "/jvm.out";
  UserNamespaceJvm jvm(jdk_home("17"), output);
  ASSERT_GT(jvm.pid(), 0);
  ASSERT_TRUE(wait_for_text(output, "ready", 30)) << read_text(output);
  auto target = attach_target_of(static_cast<uint32_t>(jvm.pid()));
  ASSERT_TRUE(target.has_value()) << target.error().message;
  EXPECT_EQ(target->uid, UserNamespaceJvm::kHostIdBase);
  EXPECT_EQ(target->ns_pid, 1u);

  auto start_time = Clock::now();
  auto version = jcmd(*target, "VM.version", kTimeout);
  double first_ms = milliseconds_since(start_time);
  ASSERT_TRUE(version.has_value()) << version.error().message;
  EXPECT_TRUE(contains(*version, "JDK 17.")) << *version;
  std::printf("[ attach ] JDK 17 in a user namespace: first jcmd %.2f ms\n", first_ms);
  EXPECT_TRUE(attach_files(target->process_path + "/root/tmp") ==
              std::vector<std::string>{".java_pid1"});

  // What the forked connect avoids: the JVM sees host root as the overflow uid and hangs up.
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::string path = target->process_path + "/root/tmp/.java_pid1";
  path.copy(address.sun_path, sizeof address.sun_path - 1);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  std::string request = encode_request("jcmd", {"VM.version"}).value();
  timeval limit{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  // The JVM checks the peer as it accepts: it may hang up before or after the request is sent.
  ssize_t sent = ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  int send_errno = errno;
  char byte = 0;
  ssize_t received = sent < 0 ? -1 : ::recv(fd, &byte, 1, 0);
  int recv_errno = errno;
  ::close(fd);
  bool hung_up = sent < 0 ? (send_errno == EPIPE || send_errno == ECONNRESET)
                          : (received == 0 || (received < 0 && recv_errno == ECONNRESET));
  EXPECT_TRUE(hung_up) << "host root got an answer or a timeout (sent=" << sent
                       << ", received=" << received << ")";
}

TEST(JvmAttachFake, SocketThatNeverAnswersCostsOneTimeout)
{
  ASSERT_EQ(::geteuid(), 0u) << "the JVM attach tests need root (chown, setuid)";
  // A listener that never accepts, owned by another user: exchange() connects from a child with
  // that user's ids, and the connection sits in the backlog with no one to answer.
  TempDir scratch(kScratchParent, kReadableByAll);
  // A copy of /proc with one process of uid and gid 65534, pid 4242 in its namespace.
  std::string process = scratch.path().string() + "/proc/" + std::to_string(::getpid());
  std::string root = process + "/root";
  std::filesystem::create_directories(root + "/tmp");
  write_text(process + "/status", "Name:\tjava\nUid:\t65534\t65534\t65534\t65534\n"
                                  "Gid:\t65534\t65534\t65534\t65534\nNSpid:\t" +
                                      std::to_string(::getpid()) + "\t4242\n");
  std::string path = root + "/tmp/.java_pid4242";
  int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  path.copy(address.sun_path, sizeof address.sun_path - 1);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(listener, 5), 0);
  ASSERT_EQ(::chown(path.c_str(), 65534, 65534), 0);
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  auto opened =
      attach_target_of(static_cast<uint32_t>(::getpid()), scratch.path().string() + "/proc");
  ASSERT_TRUE(opened.has_value()) << opened.error().message;
  const AttachTarget& target = *opened;

  auto timeout = 700ms;
  auto start_time = Clock::now();
  auto body = execute(target, "jcmd", {"VM.version"}, timeout);
  auto elapsed = Clock::now() - start_time;
  ASSERT_FALSE(body.has_value());
  EXPECT_TRUE(contains(body.error().message, "before the timeout")) << body.error().message;
  EXPECT_GE(elapsed, timeout - 10ms);
  EXPECT_LT(elapsed, timeout + 200ms);
  std::printf("[ attach ] silent socket: failed after %.1f ms with a %lld ms timeout: %s\n",
              std::chrono::duration<double, std::milli>(elapsed).count(),
              static_cast<long long>(timeout.count()), body.error().message.c_str());
  ::close(listener);
}

} // namespace
} // namespace flamebpf::hotspot
