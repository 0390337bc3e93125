// The attacher and JVMs still starting, against a fake /proc: a child process stands in for the
// JVM (it ignores SIGQUIT, so a stray signal cannot kill it), the test writes its stat, status
// and maps files, and serves its attach socket.
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fmt/format.h>
#include <functional>
#include <gtest/gtest.h>
#include <mutex>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "runtimes/hotspot/agent_attacher.h"
#include "runtimes/hotspot/agent_installer.h"
#include "test_support.h"

namespace flamebpf::hotspot {
namespace {

using namespace std::chrono_literals;
using flamebpf::testing::listen_at;
using flamebpf::testing::read_request;
using flamebpf::testing::TempDir;
using flamebpf::testing::write_file;

namespace fs = std::filesystem;

const std::vector<unsigned char> kLibrary{'n', 'o', 't', ' ', 'r', 'e', 'a', 'l', 'l', 'y'};

constexpr std::string_view kJvmMaps =
    "7f0000000000-7f0000001000 r-xp 00000000 08:01 42 /opt/java/lib/server/libjvm.so\n";

// Replaces a file at once, as the kernel's /proc files change: a reader never sees it half
// written.
void replace_file(const fs::path& path, const std::string& content)
{
  write_file(path.string() + ".new", content);
  fs::rename(path.string() + ".new", path);
}

class StartingJvm : public ::testing::Test {
protected:
  void SetUp() override
  {
    jvm_ = ::fork();
    ASSERT_GE(jvm_, 0);
    if (jvm_ == 0) {
      ::signal(SIGQUIT, SIG_IGN);
      for (;;)
        ::pause();
    }
    process_ = dir_.path() / "proc" / std::to_string(jvm_);
    fs::create_directories(process_ / "root/tmp");
    set_catches_sigquit(false);
    set_stat('S', 4242);
    replace_file(process_ / "maps", std::string(kJvmMaps));
    listener_ = listen_at(socket_path());
    server_ = std::thread([this] { serve(); });
    options_.proc_root = (dir_.path() / "proc").string();
    options_.timeout = 2000ms;
  }

  void TearDown() override
  {
    ::shutdown(listener_, SHUT_RDWR); // wakes the accept
    server_.join();
    ::close(listener_);
    end_jvm();
  }

  std::string socket_path() const { return (process_ / "root/tmp/.java_pid7").string(); }

  // The status of a process of the test's user that is pid 7 in its own namespace, as HotSpot
  // shows it before (SigCgt without SIGQUIT) and after it installs its handlers.
  void set_catches_sigquit(bool catches)
  {
    replace_file(process_ / "status",
                 fmt::format("Name:\tjava\nUid:\t{0}\t{0}\t{0}\t{0}\nGid:\t{1}\t{1}\t{1}\t{1}\n"
                             "NSpid:\t{2}\t7\nSigIgn:\t0000000000000000\nSigCgt:\t{3}\n",
                             ::geteuid(), ::getegid(), jvm_,
                             catches ? "0000000101005ccd" : "0000000000000000"));
  }

  // Its /proc/<pid>/stat: a name with a space and a parenthesis, state, start time.
  void set_stat(char state, uint64_t start_time)
  {
    replace_file(process_ / "stat",
                 fmt::format("{} (ja) va) {} 1 1 1 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 19 0 {} "
                             "4000000000 9000 18446744073709551615 1 1 0 0 0 0 0 2 0 0 0 0 0 0\n",
                             jvm_, state, start_time));
  }

  void end_jvm()
  {
    if (jvm_ > 0) {
      ::kill(jvm_, SIGKILL);
      ::waitpid(jvm_, nullptr, 0);
      jvm_ = -1;
    }
  }

  // Answers load and jcmd as a JVM with frame pointers does, noting each command.
  void serve()
  {
    for (;;) {
      int connection = ::accept(listener_, nullptr, nullptr);
      if (connection < 0)
        return;
      std::string request = read_request(connection);
      // "1\0<command>\0...": the command is the second field.
      size_t start = request.find('\0') + 1;
      std::string command = request.substr(start, request.find('\0', start) - start);
      size_t argument_at = request.find('\0', start) + 1;
      std::string argument =
          request.substr(argument_at, request.find('\0', argument_at) - argument_at);
      std::string reply = "0\n-XX:CICompilerCount=2 -XX:+PreserveFramePointer\n";
      std::function<void()> after_reply;
      {
        // Before the reply: once it is sent, the test may look.
        std::lock_guard lock(mutex_);
        commands_.push_back(command == "jcmd" ? command + " " + argument : command);
        if (command == "load") {
          reply = load_reply_;
          after_reply = after_load_;
        }
        // HotSpot writes its map, as the JVM's user, unless told it cannot.
        if (argument == "Compiler.perfmap") {
          reply = "0\n";
          if (writes_perf_map_)
            write_file((process_ / "root/tmp/perf-7.map").string(), "7f0000100000 10 A.b()\n");
        }
      }
      (void)!::write(connection, reply.data(), reply.size());
      ::close(connection);
      if (after_reply)
        after_reply();
    }
  }

  // How the JVM answers load, and what it does right after.
  void answer_load(std::string reply, std::function<void()> then)
  {
    std::lock_guard lock(mutex_);
    load_reply_ = std::move(reply);
    after_load_ = std::move(then);
  }

  std::vector<std::string> commands()
  {
    std::lock_guard lock(mutex_);
    return commands_;
  }

  // Waits until condition holds, for at most timeout; returns whether it did.
  template <class Condition> static bool eventually(Condition condition, auto timeout)
  {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!condition()) {
      if (std::chrono::steady_clock::now() >= deadline)
        return false;
      std::this_thread::sleep_for(10ms);
    }
    return true;
  }

  TempDir dir_;
  pid_t jvm_ = -1;
  fs::path process_;
  int listener_ = -1;
  std::thread server_;
  std::mutex mutex_;
  std::vector<std::string> commands_;
  std::string load_reply_ = "0\nreturn code: 0\n";
  bool writes_perf_map_ = true;
  std::function<void()> after_load_;
  AttacherOptions options_;
};

TEST_F(StartingJvm, AttachedOnceItHandlesSigquit)
{
  options_.starting_patience = 20s;
  AgentAttacher attacher(kLibrary, options_);
  attacher.on_jvm(static_cast<uint32_t>(jvm_), false, "target t");
  ASSERT_TRUE(eventually([&] { return attacher.put_off() >= 2; }, 5s));
  // Never asked anything while it starts, although its socket is there.
  EXPECT_TRUE(commands().empty());
  EXPECT_EQ(attacher.attached(), 0u);
  EXPECT_EQ(attacher.pending(), 1u);

  set_catches_sigquit(true);
  ASSERT_TRUE(eventually([&] { return attacher.pending() == 0; }, 10s));
  EXPECT_EQ(attacher.attached(), 1u);
  EXPECT_EQ(attacher.failed(), 0u);
  EXPECT_EQ(commands(), (std::vector<std::string>{"load", "jcmd VM.flags"}));
  EXPECT_TRUE(fs::exists(process_ / "root/tmp" / agent_file_name(kLibrary)));
}

TEST_F(StartingJvm, NeverHandlingSigquitFailsOnceAfterThePatienceAndIsNeverSignalled)
{
  options_.starting_patience = 500ms;
  ::unlink(socket_path().c_str()); // no listener: the attach would have to start it
  AgentAttacher attacher(kLibrary, options_);
  auto started = std::chrono::steady_clock::now();
  attacher.on_jvm(static_cast<uint32_t>(jvm_), false, "target t");
  ASSERT_TRUE(eventually([&] { return attacher.pending() == 0; }, 10s));
  EXPECT_GE(std::chrono::steady_clock::now() - started, 500ms);
  EXPECT_GE(attacher.put_off(), 2u);
  EXPECT_EQ(attacher.failed(), 1u);
  EXPECT_EQ(attacher.attached(), 0u);
  EXPECT_FALSE(fs::exists(process_ / "root/tmp/.attach_pid7"));
  EXPECT_EQ(::waitpid(jvm_, nullptr, WNOHANG), 0) << "the JVM died";
}

TEST_F(StartingJvm, ExitingWhileStartingIsNoFailure)
{
  AgentAttacher attacher(kLibrary, options_);
  attacher.on_jvm(static_cast<uint32_t>(jvm_), false, "target t");
  ASSERT_TRUE(eventually([&] { return attacher.put_off() >= 1; }, 5s));
  set_stat('Z', 4242); // exited, not yet reaped: its status shows no handlers at all
  ASSERT_TRUE(eventually([&] { return attacher.pending() == 0; }, 10s));
  EXPECT_EQ(attacher.failed(), 0u);
  EXPECT_EQ(attacher.attached(), 0u);
  EXPECT_TRUE(commands().empty());
}

TEST_F(StartingJvm, ExecIntoAnotherProgramIsLeftAlone)
{
  AgentAttacher attacher(kLibrary, options_);
  attacher.on_jvm(static_cast<uint32_t>(jvm_), false, "target t");
  ASSERT_TRUE(eventually([&] { return attacher.put_off() >= 1; }, 5s));
  replace_file(process_ / "maps",
               "55d000000000-55d000001000 r-xp 00000000 08:01 50 /usr/sbin/nginx\n");
  set_catches_sigquit(true); // nginx handles SIGQUIT: a graceful shutdown
  ASSERT_TRUE(eventually([&] { return attacher.pending() == 0; }, 10s));
  EXPECT_EQ(attacher.attached(), 0u);
  EXPECT_EQ(attacher.failed(), 0u);
  EXPECT_TRUE(commands().empty());
  EXPECT_FALSE(fs::exists(process_ / "root/tmp" / agent_file_name(kLibrary)));
}

TEST_F(StartingJvm, OneAttachPerProcessAndAReusedPidIsANewProcess)
{
  options_.starting_patience = 20s;
  AgentAttacher attacher(kLibrary, options_);
  auto pid = static_cast<uint32_t>(jvm_);
  attacher.on_jvm(pid, false, "target t");
  attacher.on_jvm(pid, false, "target t"); // another image of it (a script that exec'd java)
  ASSERT_TRUE(eventually([&] { return attacher.put_off() >= 1; }, 5s));
  EXPECT_EQ(attacher.pending(), 1u);
  attacher.forget_if_gone(pid); // still there: kept
  EXPECT_EQ(attacher.pending(), 1u);

  // The JVM exits and its pid goes to a new process, a JVM that has started.
  set_stat('S', 9999);
  attacher.forget_if_gone(pid);
  ASSERT_TRUE(eventually([&] { return attacher.pending() == 0; }, 5s));
  set_catches_sigquit(true);
  attacher.on_jvm(pid, false, "target t");
  ASSERT_TRUE(eventually([&] { return attacher.pending() == 0; }, 10s));
  EXPECT_EQ(attacher.attached(), 1u);
  EXPECT_EQ(commands(), (std::vector<std::string>{"load", "jcmd VM.flags"}));
}

TEST_F(StartingJvm, AgentLoadedWhileStartingIsNotLoadedAgain)
{
  options_.starting_patience = 20s;
  AgentAttacher attacher(kLibrary, options_);
  attacher.on_jvm(static_cast<uint32_t>(jvm_), false, "target t");
  ASSERT_TRUE(eventually([&] { return attacher.put_off() >= 1; }, 5s));
  // -agentpath: the JVM loads perf-map-agent while it starts.
  write_file(
      process_ / "maps",
      "7f0000000000-7f0000001000 r-xp 00000000 08:01 42 /opt/jdk/lib/server/libjvm.so\n"
      "7f0000100000-7f0000101000 r-xp 00000000 08:01 43 /opt/perf-map-agent/libperfmap.so\n");
  set_catches_sigquit(true);
  ASSERT_TRUE(eventually([&] { return attacher.pending() == 0; }, 10s));
  EXPECT_EQ(attacher.attached(), 0u);
  EXPECT_EQ(attacher.failed(), 0u);
  // Only its flags were read, for the frame-pointer check.
  EXPECT_EQ(commands(), (std::vector<std::string>{"jcmd VM.flags"}));
}

// -Xrs: HotSpot never handles SIGQUIT, so waiting for it to start would only delay the warning.
TEST_F(StartingJvm, JvmWithReducedSignalsFailsAtOnceAndIsNeverSignalled)
{
  options_.starting_patience = 20s;
  ::unlink(socket_path().c_str());
  constexpr char kCmdline[] = "java\0-Xrs\0-cp\0/app\0Service";
  write_file(process_ / "cmdline", std::string(kCmdline, sizeof kCmdline));
  AgentAttacher attacher(kLibrary, options_);
  auto started = std::chrono::steady_clock::now();
  attacher.on_jvm(static_cast<uint32_t>(jvm_), false, "target t");
  ASSERT_TRUE(eventually([&] { return attacher.pending() == 0; }, 10s));
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
  EXPECT_EQ(attacher.put_off(), 0u);
  EXPECT_EQ(attacher.failed(), 1u);
  EXPECT_FALSE(fs::exists(process_ / "root/tmp/.attach_pid7"));
}

// HotSpot refuses agents once it shuts down (GetEnv fails): a short-lived JVM attached at its end.
TEST_F(StartingJvm, RefusedLoadOfAJvmThatThenExitsIsNoFailure)
{
  set_catches_sigquit(true);
  answer_load("0\nreturn code: -1\n", [this] { set_stat('Z', 4242); });
  AgentAttacher attacher(kLibrary, options_);
  attacher.on_jvm(static_cast<uint32_t>(jvm_), false, "target t");
  ASSERT_TRUE(eventually([&] { return attacher.pending() == 0; }, 10s));
  EXPECT_EQ(attacher.failed(), 0u);
  EXPECT_EQ(attacher.attached(), 0u);
  EXPECT_EQ(commands(), (std::vector<std::string>{"load"}));
}

TEST_F(StartingJvm, RefusedLoadOfAJvmThatKeepsRunningIsAFailure)
{
  set_catches_sigquit(true);
  answer_load("0\nreturn code: -1\n", nullptr);
  AgentAttacher attacher(kLibrary, options_);
  auto started = std::chrono::steady_clock::now();
  attacher.on_jvm(static_cast<uint32_t>(jvm_), false, "target t");
  ASSERT_TRUE(eventually([&] { return attacher.pending() == 0; }, 10s));
  EXPECT_GE(std::chrono::steady_clock::now() - started, 500ms); // it was given time to exit
  EXPECT_EQ(attacher.failed(), 1u);
  EXPECT_EQ(attacher.attached(), 0u);
}

// Where the agent has no place (a /tmp others may write without the sticky bit, and no other
// scratch directory), HotSpot is asked for its perf map instead; asked again when samples meet
// code the map lacks, but no sooner than the pace allows.
TEST_F(StartingJvm, NoPlaceForTheAgentHasHotSpotWriteItsMapAtAPace)
{
  set_catches_sigquit(true);
  fs::permissions(process_ / "root/tmp", fs::perms(0777));
  AgentAttacher attacher(kLibrary, options_);
  auto pid = static_cast<uint32_t>(jvm_);
  attacher.on_jvm(pid, false, "target t");
  ASSERT_TRUE(eventually([&] { return attacher.pending() == 0; }, 10s));
  EXPECT_EQ(attacher.named_by_map_command(), 1u);
  EXPECT_EQ(attacher.attached(), 0u);
  EXPECT_EQ(attacher.failed(), 0u);
  EXPECT_EQ(commands(), (std::vector<std::string>{"jcmd Compiler.perfmap", "jcmd VM.flags"}));
  EXPECT_EQ(attacher.take_rewritten_perf_maps(), std::vector<uint32_t>{pid});
  EXPECT_FALSE(fs::exists(process_ / "root/tmp" / agent_file_name(kLibrary)));

  // Too soon: nothing is asked.
  attacher.perf_map_lacks_code(pid);
  attacher.wait_idle(std::chrono::steady_clock::now() + 2s);
  EXPECT_EQ(commands().size(), 2u);
  EXPECT_TRUE(attacher.take_rewritten_perf_maps().empty());
  // Once the pace allows, it is written again, once however often it is asked.
  std::this_thread::sleep_for(AgentAttacher::kMinMapRewriteGap + 100ms);
  attacher.perf_map_lacks_code(pid);
  attacher.perf_map_lacks_code(pid);
  attacher.wait_idle(std::chrono::steady_clock::now() + 2s);
  EXPECT_EQ(commands().size(), 3u);
  EXPECT_EQ(commands().back(), "jcmd Compiler.perfmap");
  EXPECT_EQ(attacher.take_rewritten_perf_maps(), std::vector<uint32_t>{pid});
  // A process that is no JVM named this way is never asked.
  attacher.perf_map_lacks_code(pid + 1);
  attacher.wait_idle(std::chrono::steady_clock::now() + 2s);
  EXPECT_EQ(commands().size(), 3u);
}

// A HotSpot that cannot write its map (its /tmp is full or read-only) only warns on its own
// output: the missing file is what tells, and the JVM is a failure.
TEST_F(StartingJvm, PerfMapHotSpotDidNotWriteIsAFailure)
{
  set_catches_sigquit(true);
  fs::permissions(process_ / "root/tmp", fs::perms(0777));
  writes_perf_map_ = false;
  AgentAttacher attacher(kLibrary, options_);
  attacher.on_jvm(static_cast<uint32_t>(jvm_), false, "target t");
  ASSERT_TRUE(eventually([&] { return attacher.pending() == 0; }, 10s));
  EXPECT_EQ(attacher.named_by_map_command(), 0u);
  EXPECT_EQ(attacher.failed(), 1u);
  EXPECT_TRUE(attacher.take_rewritten_perf_maps().empty());
}

} // namespace
} // namespace flamebpf::hotspot
