#include "runtimes/hotspot/attach_connection.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <ctime>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "common/capabilities.h"
#include "runtimes/hotspot/attach_protocol.h"

namespace flamebpf::hotspot {
namespace {

using Clock = AttachConnection::Clock;

// Milliseconds left until deadline, for poll(): never negative.
int remaining_ms(Clock::time_point deadline)
{
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
}

// Exit codes of the connecting child besides errno values (which are all below 200).
constexpr int kChildSetgroupsFailed = 200;
constexpr int kChildSetgidFailed = 201;
constexpr int kChildSetuidFailed = 202;

int64_t monotonic_ns()
{
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

// connect() on a non-blocking socket, retried while the listener's backlog is full. Only system
// calls: this also runs in a child forked from a multi-threaded process.
int connect_until(int socket_fd, const sockaddr_un& address, int64_t deadline_ns)
{
  for (;;) {
    if (::connect(socket_fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0)
      return 0;
    int error_number = errno;
    if ((error_number != EAGAIN && error_number != EINTR) || monotonic_ns() >= deadline_ns)
      return error_number;
    timespec pause{0, 2'000'000};
    ::nanosleep(&pause, nullptr);
  }
}

} // namespace

Result<AttachConnection> AttachConnection::open(int socket_file_fd,
                                                uint32_t uid,
                                                uint32_t gid,
                                                const std::string& shown,
                                                Clock::time_point deadline)
{
  UniqueFd socket(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!socket.valid())
    return fail(system_error(errno, "cannot create a UNIX socket"));
  int socket_fd = socket.get();
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::string path = "/proc/self/fd/" + std::to_string(socket_file_fd);
  std::copy(path.begin(), path.end(), address.sun_path);
  int64_t deadline_ns = monotonic_ns() + int64_t{remaining_ms(deadline)} * 1'000'000;

  auto connect_error = [&](int error_number) {
    return system_error(error_number, "cannot connect to " + shown);
  };
  if (::geteuid() == uid && ::getegid() == gid) {
    if (int error_number = connect_until(socket_fd, address, deadline_ns); error_number != 0)
      return fail(connect_error(error_number));
    return AttachConnection(std::move(socket));
  }

  pid_t child = ::fork();
  if (child < 0)
    return fail(system_error(errno, "cannot fork to connect to " + shown));
  if (child == 0) {
    // Raw system calls: glibc's wrappers would try to change the ids of the parent's threads.
    if (::syscall(SYS_setgroups, 0, nullptr) != 0)
      ::_exit(kChildSetgroupsFailed);
    if (::syscall(SYS_setresgid, gid, gid, gid) != 0)
      ::_exit(kChildSetgidFailed);
    if (::syscall(SYS_setresuid, uid, uid, uid) != 0)
      ::_exit(kChildSetuidFailed);
    ::_exit(std::min(connect_until(socket_fd, address, deadline_ns), kChildSetgroupsFailed - 1));
  }
  // The child only makes non-blocking system calls; the slack covers its exit.
  auto give_up = deadline + std::chrono::milliseconds(100);
  int wait_status = 0;
  for (;;) {
    pid_t done = ::waitpid(child, &wait_status, WNOHANG);
    if (done == child)
      break;
    if (done < 0 && errno != EINTR)
      return fail(system_error(errno, "cannot wait for the child connecting to " + shown));
    if (Clock::now() >= give_up) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &wait_status, 0);
      return fail(error("cannot connect to " + shown + ": the connecting child hung"));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  int code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
  std::string ids = std::to_string(uid) + ":" + std::to_string(gid);
  switch (code) {
  case 0:
    return AttachConnection(std::move(socket));
  case kChildSetgroupsFailed:
  case kChildSetgidFailed:
  case kChildSetuidFailed:
    return fail(error("cannot connect to " + shown + ": cannot switch to the JVM's uid:gid " + ids +
                      caps::setid_hint()));
  case -1:
    return fail(error("cannot connect to " + shown + ": the connecting child was killed"));
  default:
    return fail(connect_error(code));
  }
}

Result<>
AttachConnection::send(std::string_view data, const std::string& what, Clock::time_point deadline)
{
  int socket_fd = socket_.get();
  while (!data.empty()) {
    ssize_t n = ::send(socket_fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
      return fail(error("cannot send " + what +
                        ": the JVM closed the connection (it refused "
                        "the client's credentials)"));
    if (n < 0 && errno != EAGAIN && errno != EINTR)
      return fail(system_error(errno, "cannot send " + what));
    pollfd waiting{socket_fd, POLLOUT, 0};
    int ready = ::poll(&waiting, 1, remaining_ms(deadline));
    if (ready < 0 && errno != EINTR)
      return fail(system_error(errno, "cannot send " + what));
    if (ready == 0)
      return fail(error("cannot send " + what + ": the JVM took no data before the timeout"));
  }
  return {};
}

Result<std::string> AttachConnection::receive_all(const std::string& what,
                                                  Clock::time_point deadline)
{
  int socket_fd = socket_.get();
  std::string data;
  char buffer[65536];
  for (;;) {
    ssize_t n = ::recv(socket_fd, buffer, sizeof buffer, MSG_DONTWAIT);
    // A reset is the JVM closing with our request unread: the end of what it will send.
    if (n == 0 || (n < 0 && errno == ECONNRESET))
      return data;
    if (n > 0) {
      data.append(buffer, static_cast<size_t>(n));
      if (data.size() > kMaxReplyBytes)
        return fail(error("cannot read the reply to " + what + ": larger than " +
                          std::to_string(kMaxReplyBytes) + " bytes"));
      continue;
    }
    if (errno != EAGAIN && errno != EINTR)
      return fail(system_error(errno, "cannot read the reply to " + what));
    pollfd waiting{socket_fd, POLLIN, 0};
    int ready = ::poll(&waiting, 1, remaining_ms(deadline));
    if (ready < 0 && errno != EINTR)
      return fail(system_error(errno, "cannot read the reply to " + what));
    if (ready == 0)
      return fail(error("no complete reply to " + what + " before the timeout (" +
                        std::to_string(data.size()) + " bytes received)"));
  }
}

} // namespace flamebpf::hotspot
