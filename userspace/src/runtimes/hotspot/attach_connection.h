// One connection to a JVM's attach socket (see attach_protocol.h for what it carries), reached
// through a descriptor of the socket file and made with the JVM's own credentials.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"
#include "common/unique_fd.h"

namespace flamebpf::hotspot {

// A connected, non-blocking UNIX stream socket. Every call ends by its deadline: a JVM that never
// accepts, never reads or never answers costs the time left and an error, never a hang.
class AttachConnection {
public:
  using Clock = std::chrono::steady_clock;

  // Connects to the socket file behind socket_file_fd (any descriptor of it, O_PATH included).
  // The kernel resolves /proc/self/fd/<n> to that very inode, never to a path a container could
  // redirect. shown names the socket in errors.
  //
  // HotSpot accepts a peer whose SO_PEERCRED euid/egid equal its own or whose euid is 0, both as
  // seen from the JVM's user namespace. Host root is 0 only when the JVM shares the host's user
  // namespace, so when flamebpf's ids differ from uid/gid (the JVM's), a short-lived child process
  // takes those ids (SO_PEERCRED records the connecting task's credentials) and connects the
  // shared socket; the credentials of flamebpf itself never change. The child gets 100 ms past
  // the deadline to exit, then is killed.
  [[nodiscard]] static Result<AttachConnection> open(int socket_file_fd,
                                                     uint32_t uid,
                                                     uint32_t gid,
                                                     const std::string& shown,
                                                     Clock::time_point deadline);

  // Sends all of data. what names the request in errors.
  [[nodiscard]] Result<>
  send(std::string_view data, const std::string& what, Clock::time_point deadline);

  // Everything the JVM sends until it closes the connection; more than kMaxReplyBytes is an
  // error. what names the request in errors.
  [[nodiscard]] Result<std::string> receive_all(const std::string& what,
                                                Clock::time_point deadline);

private:
  explicit AttachConnection(UniqueFd socket) : socket_(std::move(socket)) {}

  UniqueFd socket_;
};

} // namespace flamebpf::hotspot
