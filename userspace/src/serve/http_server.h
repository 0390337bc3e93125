// The serve stage's listener: HTTP/1.1 GET requests through libmicrohttpd, on threads of its own
// beside the pipeline. Clients are hostile input: each connection's memory and idle time are
// bounded (a request line or headers past the memory limit get 414 or 431), a connection must
// send its headers within a deadline, one client address holds a few connections at most, at
// most max_handlers requests are answered at once (one per thread), and with a token every
// request must carry it. On a loopback listener without a token only root and flamebpf's own user
// are answered, and only under a loopback Host, so that neither another local user nor a web
// page (through DNS rebinding) reads the profiles.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <sys/types.h>
#include <thread>

#include "common/memory_account.h"
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
class Reply {
public:
  // Shared by a Reply and the server; set when the client hung up while it waited.
  struct Abandoned;
  using Give = std::function<void(std::function<HttpResponse()> answer)>;

  Reply(Give give, std::shared_ptr<const Abandoned> abandoned = nullptr);
  void operator()(std::function<HttpResponse()> answer) const { give_(std::move(answer)); }
  // Whether the client went away: its answer would go nowhere, and what waits for it can stop.
  bool abandoned() const;

private:
  Give give_;
  std::shared_ptr<const Abandoned> abandoned_;
};

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

// What the server knows of a request's sender before the handler runs.
struct RequestSender {
  const char* authorization = nullptr; // the headers, where the request has them
  const char* host = nullptr;
  const char* origin = nullptr;
  // The user of the local process that connected, where the client runs on this machine and
  // the listener is loopback; nullopt if not known.
  std::optional<uid_t> local_user;
};

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
  // One client address holds at most this many: a client opening connections it never uses
  // leaves room for the others.
  unsigned max_connections_per_address = 32;
  unsigned idle_timeout_seconds = 10;
  // A connection sends its request line and headers within this of its start or of its previous
  // answer, however it trickles them, or is closed.
  std::chrono::milliseconds headers_deadline{5000};
  size_t connection_memory = 32 * 1024; // the request line and headers must fit
  // Where the answers' bodies are measured while they are sent (nowhere, if null). Measured, not
  // charged: an answer is flamebpf's own, its size bounded by the routes and the handlers.
  std::shared_ptr<MemoryAccount> memory;
};

class HttpServer {
public:
  // Starts listening; handler answers every GET that passed the token check. The socket is bound
  // with the calling thread's capabilities; the server's threads hold none from their start.
  [[nodiscard]] static Result<std::unique_ptr<HttpServer>> start(HttpServerOptions options,
                                                                 HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The port bound (the one asked for, or the kernel's choice for port 0).
  uint16_t port() const { return port_; }
  const HttpServerOptions& options() const { return options_; }

  // The answer to one request, as the connection handler gives it: for tests and for the
  // handler's callers alike.
  HttpResponse
  answer(const std::string& method, const HttpRequest& request, const RequestSender& sender) const;

  // A connection whose answer is deferred; shared by the connection and the Reply given for it.
  struct Waiting;
  // Keeps the connection waiting for its answer, and hands the Reply to response.deferred.
  void defer(const std::shared_ptr<Waiting>& waiting, const HttpResponse& response);
  // A deferred request ended (answered, or its connection closed).
  void waiting_done(const Waiting& waiting);

  // The open connections, for the headers' deadline: libmicrohttpd's own timeout is reset by
  // every byte.
  struct Connections;
  Connections& connections() { return *connections_; }

private:
  HttpServer(HttpServerOptions options, HttpHandler handler);
  // Closes the connections past the headers' deadline and answers the waiting ones whose client
  // hung up, until the server stops.
  void watch_connections();

  HttpServerOptions options_;
  HttpHandler handler_;
  // The connections waiting for a deferred answer: answered 503 at the stop, since libmicrohttpd
  // cannot stop with a connection suspended. Shared with the Replies, which may outlive the server.
  struct WaitingList;
  std::shared_ptr<WaitingList> waiting_;
  std::unique_ptr<Connections> connections_;
  std::thread watcher_;
  MHD_Daemon* daemon_ = nullptr;
  uint16_t port_ = 0;
};

// Whether a and b are equal, in time that depends on their lengths only.
bool same_secret(const std::string& a, const std::string& b);

// What every thread that answers clients is, from its first request on: named
// kServingThreadName, at a lower priority than the pipeline's threads (serving never slows
// sampling or the dumps), and without any capability (which the server's threads hold none of
// from their start). True if all of that took.
inline constexpr const char* kServingThreadName = "flamebpf-http";
bool become_a_serving_thread();

} // namespace flamebpf::serve
