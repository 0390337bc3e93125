// Who is at the other end of a TCP connection that comes from this machine. The kernel's socket
// diagnostics (NETLINK_SOCK_DIAG) find the client's own socket by the connection's two addresses
// and name its owner, as `ss -e` shows it: a loopback listener tells root and flamebpf's own user
// from every other local user without a token.
#pragma once

#include <optional>
#include <sys/types.h>

namespace flamebpf::serve {

// The user owning the client's socket of the connection on connection_fd (a TCP socket this
// process accepted); nullopt if the client is not on this machine or the kernel does not say.
std::optional<uid_t> local_peer_user(int connection_fd);

} // namespace flamebpf::serve
