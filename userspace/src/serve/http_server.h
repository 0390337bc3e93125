// The serve stage's listener: HTTP/1.1 GET requests through libmicrohttpd, on threads of its own
// beside the pipeline. Clients are hostile input: each connection's memory and idle time are
// bounded (a request line or headers past the memory limit get 414 or 431), at most max_handlers
// requests are answered at once (one per thread), and with a token every request must carry it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "common/result.h"

struct MHD_Daemon;

namespace flamebpf::serve {

struct HttpRequest {
  std::string path;                         // decoded, without the query
  std::map<std::string, std::string> query; // decoded; the first value of each name
};

struct HttpResponse;
// Gives a deferred answer, once, from any thread: answer is then called on one of the server's
// threads to make it, so that the caller never renders on its own time.
using Reply = std::function<void(std::function<HttpResponse()> answer)>;

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::map<std::string, std::string> headers; // besides Content-Type
  // Set: the answer comes later. The server keeps the connection waiting, holding no thread, and
  // calls deferred with the Reply that gives the answer. Replies still due when the server stops
  // are answered 503.
  std::function<void(Reply)> deferred;
};

// A plain-text answer: body and a newline.
HttpResponse plain_text(int status, std::string body);

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

// Where to listen: "ADDR:PORT", "[IPv6]:PORT", ":PORT" or "PORT" (127.0.0.1).
struct ListenAddress {
  std::string host = "127.0.0.1"; // numeric
  uint16_t port = 0;
  bool ipv6 = false;
  // 127.0.0.0/8 or ::1: only this machine can connect.
  bool loopback() const;
};
[[nodiscard]] Result<ListenAddress> parse_listen_address(const std::string& text);

struct HttpServerOptions {
  ListenAddress address;
  std::string token; // bearer token every request must carry; none if empty
  // Requests answered at once: each on a thread of its own, so one slow answer holds no other.
  unsigned max_handlers = 2;
  unsigned max_connections = 2048;
  unsigned idle_timeout_seconds = 10;
  size_t connection_memory = 32 * 1024; // the request line and headers must fit
};

class HttpServer {
public:
  // Starts listening; handler answers every GET that passed the token check.
  [[nodiscard]] static Result<std::unique_ptr<HttpServer>> start(HttpServerOptions options,
                                                                 HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The port bound (the one asked for, or the kernel's choice for port 0).
  uint16_t port() const { return port_; }

  // The answer to one request, as the connection handler gives it: for tests and for the
  // handler's callers alike. authorization is the request's Authorization header, if any.
  HttpResponse
  answer(const std::string& method, const HttpRequest& request, const char* authorization) const;

  // A connection whose answer is deferred; shared by the connection and the Reply given for it.
  struct Waiting;
  // Keeps the connection waiting for its answer, and hands the Reply to response.deferred.
  void defer(const std::shared_ptr<Waiting>& waiting, const HttpResponse& response);
  // A deferred request ended (answered, or its connection closed).
  void waiting_done(const Waiting& waiting);

private:
  HttpServer(HttpServerOptions options, HttpHandler handler);

  HttpServerOptions options_;
  HttpHandler handler_;
  // The connections waiting for a deferred answer: answered 503 at the stop, since libmicrohttpd
  // cannot stop with a connection suspended. Shared with the Replies, which may outlive the server.
  struct WaitingList;
  std::shared_ptr<WaitingList> waiting_;
  MHD_Daemon* daemon_ = nullptr;
  uint16_t port_ = 0;
};

// Whether a and b are equal, in time that depends on their lengths only.
bool same_secret(const std::string& a, const std::string& b);

} // namespace flamebpf::serve
