// A datagram socket standing in for systemd's notify socket: what flamebpf, run as a service of
// Type=notify, tells systemd (READY=1, WATCHDOG=1, STOPPING=1, ...).
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <vector>

#include "wait.h"

namespace flamebpf::testing {

class NotifySocket {
public:
  explicit NotifySocket(std::string path) : path_(std::move(path))
  {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    path_.copy(address.sun_path, sizeof address.sun_path - 1);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0)
      throw std::runtime_error("cannot bind " + path_);
  }
  ~NotifySocket()
  {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;

  const std::string& path() const { return path_; }
  // Every message received since the last call.
  std::vector<std::string> take()
  {
    std::vector<std::string> messages;
    char buffer[4096];
    for (ssize_t n; (n = ::recv(fd_, buffer, sizeof buffer, 0)) > 0;)
      messages.emplace_back(buffer, static_cast<size_t>(n));
    return messages;
  }
  // Whether message has come (among those not taken yet), waiting up to timeout.
  bool wait_for(const std::string& message, std::chrono::seconds timeout)
  {
    return poll_until(
        [&] {
          for (const auto& received : take())
            if (received == message)
              return true;
          return false;
        },
        timeout);
  }

private:
  std::string path_;
  int fd_ = -1;
};

} // namespace flamebpf::testing
