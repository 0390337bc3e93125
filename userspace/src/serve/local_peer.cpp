#include "serve/local_peer.h"

#include <cstring>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "common/log.h"
#include "common/unique_fd.h"

namespace flamebpf::serve {
namespace {

// The address bytes and port (network order) of an IPv4 or IPv6 socket address.
struct Endpoint {
  unsigned char address[16] = {};
  size_t address_size = 0;
  uint16_t port = 0;
};

template <typename Address> Endpoint endpoint_of(const Address& address, uint16_t port)
{
  static_assert(sizeof address <= sizeof Endpoint::address);
  Endpoint found;
  std::memcpy(found.address, &address, sizeof address);
  found.address_size = sizeof address;
  found.port = port;
  return found;
}

std::optional<Endpoint> endpoint(const sockaddr_storage& storage)
{
  if (storage.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(storage);
    return endpoint_of(v4.sin_addr, v4.sin_port);
  }
  if (storage.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(storage);
    return endpoint_of(v6.sin6_addr, v6.sin6_port);
  }
  return std::nullopt;
}

} // namespace

std::optional<uid_t> local_peer_user(int connection_fd)
{
  sockaddr_storage local{};
  sockaddr_storage peer{};
  socklen_t local_size = sizeof local;
  socklen_t peer_size = sizeof peer;
  if (::getsockname(connection_fd, reinterpret_cast<sockaddr*>(&local), &local_size) != 0 ||
      ::getpeername(connection_fd, reinterpret_cast<sockaddr*>(&peer), &peer_size) != 0 ||
      local.ss_family != peer.ss_family)
    return std::nullopt;
  auto ours = endpoint(local);
  auto theirs = endpoint(peer);
  if (!ours || !theirs)
    return std::nullopt;

  UniqueFd diag(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  if (!diag.valid())
    return std::nullopt;
  // The client's socket: its own address is the connection's peer, its peer is us.
  struct {
    nlmsghdr header;
    inet_diag_req_v2 request;
  } message{};
  message.header.nlmsg_len = sizeof message;
  message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  message.header.nlmsg_flags = NLM_F_REQUEST;
  message.request.sdiag_family = static_cast<uint8_t>(local.ss_family);
  message.request.sdiag_protocol = IPPROTO_TCP;
  message.request.idiag_states = ~0u;
  message.request.id.idiag_sport = theirs->port;
  message.request.id.idiag_dport = ours->port;
  std::memcpy(message.request.id.idiag_src, theirs->address, theirs->address_size);
  std::memcpy(message.request.id.idiag_dst, ours->address, ours->address_size);
  message.request.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  message.request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(diag.get(), &message, sizeof message, 0, reinterpret_cast<sockaddr*>(&kernel),
               sizeof kernel) != static_cast<ssize_t>(sizeof message))
    return std::nullopt;

  alignas(nlmsghdr) char answer[4096];
  ssize_t received = ::recv(diag.get(), answer, sizeof answer, 0);
  if (received <= 0)
    return std::nullopt;
  auto remaining = static_cast<size_t>(received);
  for (auto* header = reinterpret_cast<nlmsghdr*>(answer); NLMSG_OK(header, remaining);
       header = NLMSG_NEXT(header, remaining)) {
    if (header->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
        header->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg)))
      return std::nullopt; // NLMSG_ERROR: no such socket here, the client is elsewhere
    const auto* socket = static_cast<const inet_diag_msg*>(NLMSG_DATA(header));
    if (socket->id.idiag_sport != theirs->port || socket->id.idiag_dport != ours->port)
      return std::nullopt;
    return static_cast<uid_t>(socket->idiag_uid);
  }
  return std::nullopt;
}

} // namespace flamebpf::serve
