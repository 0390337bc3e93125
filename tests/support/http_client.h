// A plain HTTP/1.1 client over loopback for the tests of --listen: raw requests, so that a test
// can send what no well-behaved client would (a 10 MB request line, a request never finished).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/unique_fd.h"

namespace flamebpf::testing {

// A connection to 127.0.0.1:port from the loopback address from (a client of its own for the
// server's limits per address); invalid if refused.
UniqueFd connect_loopback(uint16_t port, const char* from = "127.0.0.1");

// Sends all of bytes, or as much as the peer takes before it closes.
void send_all(int fd, std::string_view bytes);

// Everything the peer sends until it closes the connection, or until the deadline.
std::string read_all(int fd, std::chrono::milliseconds deadline = std::chrono::seconds(10));

// The raw answer to one raw request on a new connection ("no connection" if refused).
std::string http_exchange(uint16_t port, const std::string& request);

// The raw answer to GET target under Host: localhost, with extra header lines ("Name: value\r\n"
// each).
std::string http_get(uint16_t port, const std::string& target, const std::string& headers = "");

// An answer's status code (0 if it is none) and body.
int http_status(const std::string& answer);
std::string http_body(const std::string& answer);

} // namespace flamebpf::testing
