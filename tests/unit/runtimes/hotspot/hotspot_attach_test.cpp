#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <poll.h>
#include <random>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "common/procfs.h"
#include "runtimes/hotspot/hotspot_attach.h"
#include "test_support.h"

namespace flamebpf::hotspot {
namespace {

using namespace std::chrono_literals;
using namespace std::string_literals;
using flamebpf::testing::listen_at;
using flamebpf::testing::read_data;
using flamebpf::testing::read_request;
using flamebpf::testing::TempDir;
using flamebpf::testing::write_file;

std::string fixture(const std::string& name)
{
  return read_data("attach/" + name);
}

bool contains(const std::string& text, const std::string& part)
{
  return text.find(part) != std::string::npos;
}

std::string read_whole(const std::string& path)
{
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Opens of the files in a directory, seen by inotify from construction on. An O_PATH lookup
// opens nothing for real and reports nothing.
class InodeEvents {
public:
  explicit InodeEvents(const std::string& dir) : fd_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC))
  {
    EXPECT_GE(::inotify_add_watch(fd_, dir.c_str(), IN_OPEN), 0) << dir;
  }
  ~InodeEvents() { ::close(fd_); }
  InodeEvents(const InodeEvents&) = delete;
  InodeEvents& operator=(const InodeEvents&) = delete;

  // How often name was opened so far.
  int opened(const std::string& name)
  {
    alignas(inotify_event) char buffer[4096];
    for (ssize_t n; (n = ::read(fd_, buffer, sizeof buffer)) > 0;) {
      for (char* at = buffer; at < buffer + n;) {
        const auto* event = reinterpret_cast<const inotify_event*>(at);
        if (event->len > 0)
          ++opens_[event->name];
        at += sizeof(inotify_event) + event->len;
      }
    }
    return opens_[name];
  }

private:
  int fd_;
  std::map<std::string, int> opens_;
};

// --- /proc/<pid>/status ------------------------------------------------------------------------

// The target attach_target_of makes of a process whose status is the given text.
Result<AttachTarget> target_with_status(const TempDir& dir, const std::string& status)
{
  write_file(dir.path() / "4242/status", status);
  return attach_target_of(4242, dir.path().string());
}

TEST(AttachStatus, ContainerJvmHasItsInnermostPidAndEffectiveIds)
{
  TempDir dir;
  auto status = target_with_status(dir, fixture("jvm_in_container.status"));
  ASSERT_TRUE(status.has_value()) << status.error().message;
  EXPECT_EQ(status->ns_pid, 1u);
  EXPECT_EQ(status->uid, 1000u);
  EXPECT_EQ(status->gid, 1000u);
  EXPECT_TRUE(status->catches_sigquit);
}

TEST(AttachStatus, HostJvmAndOldKernel)
{
  TempDir dir;
  auto host = target_with_status(dir, fixture("jvm_on_host.status"));
  ASSERT_TRUE(host.has_value());
  EXPECT_EQ(host->ns_pid, 11082u);
  // No NSpid line: the process shares flamebpf's pid namespace.
  EXPECT_FALSE(procfs::status_field(fixture("old_kernel.status"), "NSpid", -1).has_value());
  auto old = target_with_status(dir, fixture("old_kernel.status"));
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->ns_pid, 4242u);
}

TEST(AttachStatus, SigquitIgnoredOrNotCaught)
{
  TempDir dir;
  EXPECT_FALSE(target_with_status(dir, fixture("xrs.status")).value().catches_sigquit);
  EXPECT_FALSE(target_with_status(dir, fixture("no_handlers.status")).value().catches_sigquit);
}

TEST(AttachStatus, MalformedIdsAreErrors)
{
  TempDir dir;
  auto truncated = target_with_status(dir, fixture("truncated_uid.status"));
  ASSERT_FALSE(truncated.has_value());
  EXPECT_TRUE(contains(truncated.error().message, "malformed Uid line"));
  EXPECT_FALSE(target_with_status(dir, "Name:\tjava\n").has_value());
  EXPECT_FALSE(target_with_status(dir, "Uid:\t0\t0\t0\t0\nGid:\t0\tx\t0\t0\n").has_value());
  EXPECT_FALSE(
      target_with_status(dir, "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nNSpid:\t12\t-1\n").has_value());
}

TEST(AttachTargetOf, ReadsTheStatusBelowTheProcRoot)
{
  TempDir dir;
  write_file(dir.path() / "4242/status", fixture("jvm_in_container.status"));
  write_file(dir.path() / "4243/status", fixture("old_kernel.status"));
  write_file(dir.path() / "4242/stat", "4242 (java) S 1 1 1 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 19 "
                                       "0 987654 4000000000 9000 18446744073709551615\n");
  auto target = attach_target_of(4242, dir.path().string());
  ASSERT_TRUE(target.has_value()) << target.error().message;
  EXPECT_EQ(target->host_pid, 4242u);
  EXPECT_EQ(target->ns_pid, 1u);
  EXPECT_EQ(target->uid, 1000u);
  EXPECT_EQ(target->gid, 1000u);
  EXPECT_EQ(target->process_path, dir.path().string() + "/4242");
  EXPECT_EQ(target->start_time, 987654u);

  EXPECT_EQ(attach_target_of(4243, dir.path().string()).value().ns_pid, 4243u);
  EXPECT_EQ(attach_target_of(4243, dir.path().string()).value().start_time, std::nullopt);
  auto missing = attach_target_of(4244, dir.path().string());
  ASSERT_FALSE(missing.has_value());
  EXPECT_TRUE(contains(missing.error().message, "/4244: No such file")) << missing.error().message;
}

// --- The whole exchange against fake JVMs (no root: the "JVM" runs as the test's own user) -----

// The status of a process of the test's user that is pid 7 in its own namespace.
std::string fake_status(uint32_t host_pid)
{
  std::string uid = std::to_string(::geteuid());
  std::string gid = std::to_string(::getegid());
  return "Name:\tjava\nUid:\t" + uid + "\t" + uid + "\t" + uid + "\t" + uid + "\nGid:\t" + gid +
         "\t" + gid + "\t" + gid + "\t" + gid + "\nNSpid:\t" + std::to_string(host_pid) +
         "\t7\nSigIgn:\t0000000000000000\nSigCgt:\t0000000101005ccd\n";
}

class AttachFakeJvm : public ::testing::Test {
protected:
  void SetUp() override
  {
    process_ = dir_.path().string() + "/proc/4242";
    root_ = process_ + "/root";
    std::filesystem::create_directories(root_ + "/tmp");
    write_file(process_ + "/status", fake_status(4242));
    auto target = attach_target_of(4242, dir_.path().string() + "/proc");
    ASSERT_TRUE(target.has_value()) << target.error().message;
    target_ = *target;
  }
  void TearDown() override
  {
    // Wakes a server whose connection never came (an attach that went elsewhere).
    if (listener_ >= 0)
      ::shutdown(listener_, SHUT_RDWR);
    if (server_.joinable())
      server_.join();
    if (listener_ >= 0)
      ::close(listener_);
  }
  std::string socket_path() const { return root_ + "/tmp/.java_pid7"; }

  // Serves one connection: reads the request, then sends reply (if any) and closes.
  void serve_once(std::string reply)
  {
    listener_ = listen_at(socket_path());
    server_ = std::thread([this, reply] {
      int connection = ::accept(listener_, nullptr, nullptr);
      received_ = read_request(connection);
      if (!reply.empty())
        (void)!::write(connection, reply.data(), reply.size());
      ::close(connection);
    });
  }

  TempDir dir_;
  std::string process_; // the fake /proc/<pid> directory
  std::string root_;
  AttachTarget target_;
  int listener_ = -1;
  std::thread server_;
  std::string received_;
};

TEST_F(AttachFakeJvm, ExecuteSendsTheRequestAndReturnsTheBody)
{
  serve_once("0\nJDK 17.0.15\n");
  auto body = jcmd(target_, "VM.version", 2s);
  ASSERT_TRUE(body.has_value()) << body.error().message;
  EXPECT_EQ(*body, "JDK 17.0.15\n");
  server_.join();
  EXPECT_EQ(received_, "1\0jcmd\0VM.version\0\0\0"s);
}

TEST_F(AttachFakeJvm, LoadAgentChecksTheReturnCode)
{
  serve_once("0\nreturn code: 3\n");
  auto loaded = load_agent(target_, "/tmp/libagent.so", "opt", 2s);
  ASSERT_FALSE(loaded.has_value());
  EXPECT_EQ(loaded.error().message, "cannot load agent /tmp/libagent.so into JVM 4242: the "
                                    "agent's Agent_OnAttach failed with return code 3");
  server_.join();
  EXPECT_EQ(received_, "1\0load\0/tmp/libagent.so\0true\0opt\0"s);
  EXPECT_FALSE(load_agent(target_, "relative.so", "", 2s).has_value());
}

TEST_F(AttachFakeJvm, GarbageReplyIsAnError)
{
  serve_once("SSH-2.0-OpenSSH_9.2");
  auto body = jcmd(target_, "VM.version", 2s);
  ASSERT_FALSE(body.has_value());
  EXPECT_TRUE(contains(body.error().message, "truncated reply")) << body.error().message;
}

TEST_F(AttachFakeJvm, ClosingWithoutReplyIsAnError)
{
  // What HotSpot does with a peer whose credentials it refuses, or a request it cannot parse.
  serve_once("");
  auto body = jcmd(target_, "VM.version", 2s);
  ASSERT_FALSE(body.has_value());
  EXPECT_TRUE(contains(body.error().message, "without a reply")) << body.error().message;
}

TEST_F(AttachFakeJvm, JvmThatExitsMidExchangeIsSaidSo)
{
  listener_ = listen_at(socket_path());
  server_ = std::thread([this] {
    int connection = ::accept(listener_, nullptr, nullptr);
    char request[256];
    (void)!::read(connection, request, sizeof request);
    // The process exits: its root goes (as the kernel's link does), and the connection closes.
    std::filesystem::rename(root_, dir_.path() / "gone");
    ::close(connection);
  });
  auto body = jcmd(target_, "VM.version", 2s);
  ASSERT_FALSE(body.has_value());
  EXPECT_TRUE(contains(body.error().message, "the JVM exited")) << body.error().message;
}

TEST_F(AttachFakeJvm, HangingUpAtOnceIsAnError)
{
  // HotSpot refusing a peer's credentials closes before reading: a reset, or a failed send.
  listener_ = listen_at(socket_path());
  server_ = std::thread([this] { ::close(::accept(listener_, nullptr, nullptr)); });
  auto body = jcmd(target_, "VM.version", 2s);
  ASSERT_FALSE(body.has_value());
  EXPECT_TRUE(contains(body.error().message, "closed the connection")) << body.error().message;
}

TEST_F(AttachFakeJvm, SilentJvmCostsOneTimeout)
{
  // Never accepted: the connection completes in the backlog and nothing ever answers.
  listener_ = listen_at(socket_path());
  auto start = std::chrono::steady_clock::now();
  auto body = jcmd(target_, "VM.version", 300ms);
  auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(body.has_value());
  EXPECT_TRUE(contains(body.error().message, "before the timeout")) << body.error().message;
  EXPECT_GE(elapsed, 290ms);
  EXPECT_LT(elapsed, 800ms);
}

TEST_F(AttachFakeJvm, RefusesWhatHotspotWouldNotHaveCreated)
{
  // Accessible to others.
  listener_ = listen_at(socket_path());
  ASSERT_EQ(::chmod(socket_path().c_str(), 0666), 0);
  auto open_socket = jcmd(target_, "VM.version", 1s);
  ASSERT_FALSE(open_socket.has_value());
  EXPECT_TRUE(contains(open_socket.error().message, "other users may use it"));
  ::close(listener_);
  listener_ = -1;

  // A regular file.
  std::filesystem::remove(socket_path());
  write_file(socket_path(), "");
  auto regular = jcmd(target_, "VM.version", 1s);
  ASSERT_FALSE(regular.has_value());
  EXPECT_TRUE(contains(regular.error().message, "not a socket")) << regular.error().message;

  // A symlink to a real socket outside the root: never followed.
  std::filesystem::remove(socket_path());
  std::string outside = dir_.path().string() + "/outside.sock";
  listener_ = listen_at(outside);
  std::filesystem::create_symlink(outside, socket_path());
  auto link = jcmd(target_, "VM.version", 1s);
  ASSERT_FALSE(link.has_value());
  EXPECT_TRUE(contains(link.error().message, "not a socket")) << link.error().message;
}

TEST_F(AttachFakeJvm, TmpSymlinkedOutOfTheRootIsNotFollowed)
{
  std::filesystem::remove(root_ + "/tmp");
  std::string outside = dir_.path().string() + "/outside-tmp";
  std::filesystem::create_directories(outside);
  listener_ = listen_at(outside + "/.java_pid7");
  std::filesystem::create_symlink(outside, root_ + "/tmp");
  auto body = jcmd(target_, "VM.version", 1s);
  // Inside the root, the link's target path leads back to the link itself.
  ASSERT_FALSE(body.has_value());
  pollfd pending{listener_, POLLIN, 0};
  EXPECT_EQ(::poll(&pending, 1, 0), 0) << "connected to the socket outside the root";
}

// A forked child standing in for the JVM's signal handling: on SIGQUIT it looks for the trigger
// and, if it is there and ours, creates the socket the way HotSpot does and answers one request.
class AttachHandshake : public AttachFakeJvm {
protected:
  enum class Mode { kHotspot, kIgnoreSigquit, kDefaultSigquit };

  static inline volatile sig_atomic_t quit_count = 0;
  static void on_quit(int) { quit_count = quit_count + 1; }

  void start(Mode mode)
  {
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    child_ = ::fork();
    ASSERT_GE(child_, 0);
    if (child_ == 0) {
      if (mode != Mode::kDefaultSigquit) {
        struct sigaction action {};
        action.sa_handler = on_quit;
        ::sigaction(SIGQUIT, &action, nullptr);
      }
      (void)!::write(ready[1], "r", 1);
      while (quit_count == 0)
        ::pause();
      if (mode != Mode::kHotspot)
        for (;;)
          ::pause();
      // As HotSpot looks: its working directory first, /tmp only if there is nothing there.
      struct stat trigger {};
      if (::stat((process_ + "/cwd/.attach_pid7").c_str(), &trigger) != 0 &&
          ::stat((root_ + "/tmp/.attach_pid7").c_str(), &trigger) != 0)
        ::_exit(3);
      if (trigger.st_uid != ::geteuid() && trigger.st_uid != 0)
        ::_exit(4);
      std::string temporary = socket_path() + ".tmp";
      int listener = listen_at(temporary);
      ::rename(temporary.c_str(), socket_path().c_str());
      int connection = ::accept(listener, nullptr, nullptr);
      std::string request = read_request(connection);
      std::string reply = "0\nfake JVM got " + std::to_string(request.size()) + " bytes\n";
      (void)!::write(connection, reply.data(), reply.size());
      ::_exit(0);
    }
    char byte = 0;
    ASSERT_EQ(::read(ready[0], &byte, 1), 1);
    ::close(ready[0]);
    ::close(ready[1]);
    // The stand-in's own signal dispositions, as attach_target_of reads them from its status.
    auto status = procfs::read_file("/proc/" + std::to_string(child_) + "/status");
    ASSERT_TRUE(status.has_value());
    write_file(root_ + "/../status", *status);
    target_.catches_sigquit = procfs::catches_signal(*status, SIGQUIT);
    auto stat = procfs::read_file("/proc/" + std::to_string(child_) + "/stat");
    ASSERT_TRUE(stat.has_value());
    write_file(root_ + "/../stat", *stat);
    child_start_time_ = procfs::live_start_time_in_stat(*stat).value_or(0);
    target_.host_pid = static_cast<uint32_t>(child_);
  }
  void TearDown() override
  {
    if (child_ > 0) {
      ::kill(child_, SIGKILL);
      ::waitpid(child_, nullptr, 0);
    }
    AttachFakeJvm::TearDown();
  }
  bool child_alive() const { return ::waitpid(child_, nullptr, WNOHANG) == 0; }
  bool trigger_exists() const
  {
    std::error_code ignored;
    return std::filesystem::exists(std::filesystem::symlink_status(trigger_in_tmp())) ||
           std::filesystem::exists(std::filesystem::symlink_status(trigger_in_cwd()));
  }
  std::string trigger_in_tmp() const { return root_ + "/tmp/.attach_pid7"; }
  std::string trigger_in_cwd() const { return process_ + "/cwd/.attach_pid7"; }
  // The fake process's working directory, where HotSpot looks for the trigger first.
  void make_cwd() const { std::filesystem::create_directories(process_ + "/cwd"); }

  pid_t child_ = -1;
  uint64_t child_start_time_ = 0;
};

TEST_F(AttachHandshake, TriggerSigquitSocketReplyThenTriggerRemoved)
{
  start(Mode::kHotspot);
  auto body = jcmd(target_, "VM.flags", 5s);
  ASSERT_TRUE(body.has_value()) << body.error().message;
  EXPECT_EQ(*body, "fake JVM got " + std::to_string(encode_request("jcmd", {"VM.flags"})->size()) +
                       " bytes\n");
  EXPECT_FALSE(trigger_exists());
  int status = 0;
  ASSERT_EQ(::waitpid(child_, &status, 0), child_);
  child_ = -1;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST_F(AttachHandshake, SignalsTheProcessWithTheExpectedStartTime)
{
  start(Mode::kHotspot);
  target_.start_time = child_start_time_;
  auto body = jcmd(target_, "VM.flags", 5s);
  ASSERT_TRUE(body.has_value()) << body.error().message;
}

// The JVM exited and another process, one that handles SIGQUIT too, has its pid now.
TEST_F(AttachHandshake, NeverSignalsAProcessThatTookOverThePid)
{
  start(Mode::kHotspot);
  target_.start_time = child_start_time_ + 1;
  auto body = jcmd(target_, "VM.flags", 1s);
  ASSERT_FALSE(body.has_value());
  EXPECT_TRUE(contains(body.error().message, "is no longer the JVM")) << body.error().message;
  EXPECT_FALSE(trigger_exists());
  std::this_thread::sleep_for(50ms);
  EXPECT_TRUE(child_alive()) << "signalled: the stand-in exits once it has answered";
}

TEST_F(AttachHandshake, TriggerOfTheJvmsUserIsUsedAsItIsAndLeftThere)
{
  // Left by an attach that died, or made by a concurrent one: HotSpot takes it, so it is used,
  // and since flamebpf did not make it, it is not flamebpf's to remove.
  start(Mode::kHotspot);
  write_file(trigger_in_tmp(), "left by an attach that died");
  auto body = jcmd(target_, "VM.flags", 5s);
  ASSERT_TRUE(body.has_value()) << body.error().message;
  EXPECT_EQ(read_whole(trigger_in_tmp()), "left by an attach that died");
}

TEST_F(AttachHandshake, HardLinkAtTheTriggerIsLeftAloneAndTheWorkingDirectoryUsed)
{
  start(Mode::kHotspot);
  make_cwd();
  // A link to a file of the JVM's user: flamebpf must not make another file its trigger.
  std::string secret = root_ + "/tmp/secret";
  write_file(secret, "not a trigger");
  ASSERT_EQ(::chmod(secret.c_str(), 0600), 0);
  ASSERT_EQ(::link(secret.c_str(), trigger_in_tmp().c_str()), 0);
  InodeEvents events(root_ + "/tmp");
  auto body = jcmd(target_, "VM.flags", 5s);
  ASSERT_TRUE(body.has_value()) << body.error().message;
  EXPECT_EQ(events.opened(".attach_pid7"), 0) << "the linked file was opened";
  struct stat status {};
  ASSERT_EQ(::lstat(trigger_in_tmp().c_str(), &status), 0) << "the link was removed";
  EXPECT_EQ(status.st_nlink, 2u);
  EXPECT_EQ(status.st_mode & 07777, 0600u);
  EXPECT_EQ(status.st_uid, ::geteuid());
  EXPECT_EQ(read_whole(secret), "not a trigger");
  // The trigger flamebpf made in the working directory is gone again.
  EXPECT_FALSE(std::filesystem::exists(trigger_in_cwd()));
}

TEST_F(AttachHandshake, FifoAtTheTriggerIsNeverOpenedAndTheWorkingDirectoryUsed)
{
  start(Mode::kHotspot);
  make_cwd();
  ASSERT_EQ(::mkfifo(trigger_in_tmp().c_str(), 0600), 0);
  InodeEvents events(root_ + "/tmp");
  auto body = jcmd(target_, "VM.flags", 5s);
  ASSERT_TRUE(body.has_value()) << body.error().message;
  EXPECT_EQ(events.opened(".attach_pid7"), 0) << "the FIFO was opened";
  struct stat status {};
  ASSERT_EQ(::lstat(trigger_in_tmp().c_str(), &status), 0);
  EXPECT_TRUE(S_ISFIFO(status.st_mode));
  EXPECT_FALSE(std::filesystem::exists(trigger_in_cwd()));
}

TEST_F(AttachHandshake, UnusableTriggerInTheWorkingDirectoryFailsNamingItsHolder)
{
  // HotSpot looks no further than its working directory: nothing in /tmp would help.
  start(Mode::kHotspot);
  make_cwd();
  std::string other = process_ + "/cwd/other";
  write_file(other, "");
  ASSERT_EQ(::link(other.c_str(), trigger_in_cwd().c_str()), 0);
  auto body = jcmd(target_, "VM.flags", 1s);
  ASSERT_FALSE(body.has_value());
  EXPECT_TRUE(contains(body.error().message, trigger_in_cwd() + ": held by uid " +
                                                 std::to_string(::geteuid()) +
                                                 ", a file with 2 links"))
      << body.error().message;
  EXPECT_TRUE(contains(body.error().message, "HotSpot looks there first")) << body.error().message;
  EXPECT_FALSE(std::filesystem::exists(trigger_in_tmp()));
  EXPECT_TRUE(child_alive()) << "signalled without a trigger it would take";
}

TEST_F(AttachHandshake, NoSocketWithinTheTimeout)
{
  start(Mode::kIgnoreSigquit);
  auto start_time = std::chrono::steady_clock::now();
  auto body = jcmd(target_, "VM.flags", 400ms);
  auto elapsed = std::chrono::steady_clock::now() - start_time;
  ASSERT_FALSE(body.has_value());
  EXPECT_TRUE(contains(body.error().message, "did not create")) << body.error().message;
  EXPECT_LT(elapsed, 900ms);
  EXPECT_FALSE(trigger_exists());
  EXPECT_TRUE(child_alive());
}

TEST_F(AttachHandshake, NeverSignalsAProcessThatDoesNotHandleSigquit)
{
  start(Mode::kDefaultSigquit);
  auto body = jcmd(target_, "VM.flags", 1s);
  ASSERT_FALSE(body.has_value());
  EXPECT_TRUE(contains(body.error().message, "does not handle SIGQUIT")) << body.error().message;
  EXPECT_FALSE(trigger_exists());
  EXPECT_TRUE(child_alive());
}

TEST_F(AttachHandshake, FifoAtTheTriggerWithNoWorkingDirectoryFailsNamingItsHolder)
{
  start(Mode::kHotspot);
  ASSERT_EQ(::mkfifo(trigger_in_tmp().c_str(), 0600), 0);
  InodeEvents events(root_ + "/tmp");
  auto body = jcmd(target_, "VM.flags", 1s);
  ASSERT_FALSE(body.has_value());
  EXPECT_TRUE(contains(body.error().message,
                       "held by uid " + std::to_string(::geteuid()) + ", not a regular file"))
      << body.error().message;
  EXPECT_EQ(events.opened(".attach_pid7"), 0) << "the FIFO was opened";
  EXPECT_TRUE(child_alive());
}

// The pid passes to another process after the target was opened: everything goes on through the
// directory of the process that was opened, and nothing of the new one is read, signalled or
// connected to.
TEST_F(AttachFakeJvm, EveryFileOfTheAttachIsReachedThroughTheOneProcessDirectory)
{
  serve_once("0\nthe JVM that was checked\n");
  std::filesystem::rename(process_, dir_.path() / "proc" / "exited-4242");
  std::string other_root = process_ + "/root";
  std::filesystem::create_directories(other_root + "/tmp");
  write_file(process_ + "/status", fake_status(4242));
  int other = listen_at(other_root + "/tmp/.java_pid7");

  auto body = jcmd(target_, "VM.version", 2s);
  ASSERT_TRUE(body.has_value()) << body.error().message;
  EXPECT_EQ(*body, "the JVM that was checked\n");
  pollfd pending{other, POLLIN, 0};
  EXPECT_EQ(::poll(&pending, 1, 0), 0) << "connected to the process that took over the pid";
  ::close(other);

  EXPECT_EQ(read_process_file(target_, "status", 4096).value_or(""), fake_status(4242));
  std::string marker = "written after the pid passed on";
  write_file(dir_.path() / "proc" / "exited-4242" / "maps", marker);
  EXPECT_EQ(read_process_file(target_, "maps", 4096).value_or(""), marker);
  auto root = open_root(target_);
  ASSERT_TRUE(root.has_value()) << root.error().message;
  struct stat opened {};
  struct stat expected {};
  ASSERT_EQ(::fstat(root->get(), &opened), 0);
  ASSERT_EQ(::stat((dir_.path() / "proc" / "exited-4242" / "root").c_str(), &expected), 0);
  EXPECT_EQ(opened.st_ino, expected.st_ino);
  EXPECT_FALSE(exited(target_));
}

} // namespace
} // namespace flamebpf::hotspot
