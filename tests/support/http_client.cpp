#include "http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

namespace flamebpf::testing {

UniqueFd connect_loopback(uint16_t port, const char* from)
{
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in source{};
  source.sin_family = AF_INET;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (!fd.valid() || ::inet_pton(AF_INET, from, &source.sin_addr) != 1 ||
      ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&source), sizeof source) != 0 ||
      ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0)
    return UniqueFd();
  return fd;
}

void send_all(int fd, std::string_view bytes)
{
  while (!bytes.empty()) {
    ssize_t sent = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent <= 0)
      return; // closed by the peer: what it answered is read next
    bytes.remove_prefix(static_cast<size_t>(sent));
  }
}

std::string read_all(int fd, std::chrono::milliseconds deadline)
{
  std::string out;
  auto until = std::chrono::steady_clock::now() + deadline;
  char buffer[65536];
  while (std::chrono::steady_clock::now() < until) {
    pollfd ready{fd, POLLIN, 0};
    if (::poll(&ready, 1, 100) <= 0)
      continue;
    ssize_t got = ::recv(fd, buffer, sizeof buffer, 0);
    if (got <= 0)
      break;
    out.append(buffer, static_cast<size_t>(got));
  }
  return out;
}

std::string http_exchange(uint16_t port, const std::string& request)
{
  UniqueFd fd = connect_loopback(port);
  if (!fd.valid())
    return "no connection";
  send_all(fd.get(), request);
  return read_all(fd.get());
}

std::string http_get(uint16_t port, const std::string& target, const std::string& headers)
{
  return http_exchange(port, "GET " + target +
                                 " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n" + headers +
                                 "\r\n");
}

int http_status(const std::string& answer)
{
  if (!answer.starts_with("HTTP/1.1 ") || answer.size() < 12)
    return 0;
  return std::stoi(answer.substr(9, 3));
}

std::string http_body(const std::string& answer)
{
  auto end = answer.find("\r\n\r\n");
  return end == std::string::npos ? "" : answer.substr(end + 4);
}

} // namespace flamebpf::testing
