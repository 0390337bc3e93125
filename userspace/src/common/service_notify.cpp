#include "common/service_notify.h"

#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/unique_fd.h"

namespace flamebpf {
namespace {

// The number in an environment variable, if it is set to one.
std::optional<uint64_t> environment_number(const char* name)
{
  const char* text = std::getenv(name);
  if (!text || !*text)
    return std::nullopt;
  std::string_view value(text);
  uint64_t number = 0;
  auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), number);
  if (error != std::errc() || end != value.data() + value.size())
    return std::nullopt;
  return number;
}

// systemd's notification protocol (sd_notify(3)): one datagram to the AF_UNIX socket
// $NOTIFY_SOCKET names, a path or, after '@', an abstract name. Written here rather than linked
// from libsystemd, whose loading (with its own libraries) took a millisecond of every start.
void notify(std::string_view message)
{
  const char* socket_name = std::getenv("NOTIFY_SOCKET");
  if (!socket_name || (socket_name[0] != '/' && socket_name[0] != '@'))
    return;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  size_t length = std::strlen(socket_name);
  if (length >= sizeof address.sun_path)
    return;
  std::memcpy(address.sun_path, socket_name, length);
  if (address.sun_path[0] == '@')
    address.sun_path[0] = '\0';
  UniqueFd fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd.valid())
    return;
  auto address_length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + length);
  (void)::sendto(fd.get(), message.data(), message.size(), MSG_NOSIGNAL,
                 reinterpret_cast<const sockaddr*>(&address), address_length);
}

} // namespace

ServiceNotifier::ServiceNotifier()
{
  // The watchdog is this process's only if $WATCHDOG_PID, when set, names it.
  auto pid = environment_number("WATCHDOG_PID");
  auto period_us = environment_number("WATCHDOG_USEC");
  if (period_us && *period_us > 0 && (!pid || *pid == static_cast<uint64_t>(::getpid())))
    ping_every_ = std::chrono::microseconds(*period_us / 4);
}

void ServiceNotifier::ready()
{
  notify("READY=1");
}

void ServiceNotifier::alive()
{
  if (ping_every_ == std::chrono::steady_clock::duration::zero())
    return;
  auto now = std::chrono::steady_clock::now();
  if (now - last_ping_ < ping_every_)
    return;
  last_ping_ = now;
  notify("WATCHDOG=1");
}

void ServiceNotifier::reloading()
{
  notify("RELOADING=1");
}

void ServiceNotifier::stopping()
{
  notify("STOPPING=1");
}

} // namespace flamebpf
