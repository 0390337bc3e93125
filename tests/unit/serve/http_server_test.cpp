#include <chrono>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <mutex>
#include <poll.h>
#include <string>
#include <sys/resource.h>
#include <sys/socket.h>
#include <thread>
#include <vector>

#include "common/unique_fd.h"
#include "emit/svg.h"
#include "http_client.h"
#include "serve/content_policies.h"
#include "serve/http_server.h"
#include "serve/live_profiles.h"
#include "serve/profile_routes.h"
#include "temp_dir.h"

namespace flamebpf::serve {
namespace {

using namespace std::chrono_literals;

using testing::http_body;
using testing::http_exchange;
using testing::http_get;
using testing::http_status;

// A server on a port of the kernel's choice that echoes the request's path and query.
std::unique_ptr<HttpServer> echo_server(HttpServerOptions options = {})
{
  auto started = HttpServer::start(std::move(options), [](const HttpRequest& request) {
    HttpResponse response;
    response.body = request.path;
    for (const auto& [name, value] : request.query)
      response.body += " " + name + "=" + value;
    return response;
  });
  EXPECT_TRUE(started) << (started ? "" : started.error().message);
  return started ? std::move(*started) : nullptr;
}

// A server of the profile routes over dir, where the target web has one dump ("a;b 1").
std::unique_ptr<HttpServer> one_dump_server(const testing::TempDir& dir)
{
  std::filesystem::create_directory(dir.path() / "web");
  std::ofstream(dir.path() / "web" / "20261122T162000Z_20261122T162100Z.folded") << "a;b 1\n";
  ProfileRoutesOptions routes;
  routes.output_dir = dir.path();
  auto started = HttpServer::start({}, ProfileRoutes(routes, nullptr));
  EXPECT_TRUE(started) << (started ? "" : started.error().message);
  return started ? std::move(*started) : nullptr;
}

TEST(ListenAddress, PortAloneIsLoopbackAndOthersAreParsedOrRefused)
{
  auto port = parse_listen_address("8080");
  ASSERT_TRUE(port);
  EXPECT_EQ(port->host, "127.0.0.1");
  EXPECT_EQ(port->port, 8080);
  EXPECT_TRUE(port->loopback());
  auto colon = parse_listen_address(":0");
  ASSERT_TRUE(colon);
  EXPECT_TRUE(colon->loopback());
  auto any = parse_listen_address("0.0.0.0:9000");
  ASSERT_TRUE(any);
  EXPECT_FALSE(any->loopback());
  auto other_loopback = parse_listen_address("127.0.0.2:1");
  ASSERT_TRUE(other_loopback);
  EXPECT_TRUE(other_loopback->loopback());
  auto v6 = parse_listen_address("[::1]:7000");
  ASSERT_TRUE(v6);
  EXPECT_TRUE(v6->ipv6);
  EXPECT_TRUE(v6->loopback());
  auto v6_any = parse_listen_address("[::]:7000");
  ASSERT_TRUE(v6_any);
  EXPECT_FALSE(v6_any->loopback());
  for (const char* bad : {"", "host:80", "1.2.3.4:", "1.2.3.4:65536", "80x", "::1:80", "[::1]"}) {
    auto parsed = parse_listen_address(bad);
    ASSERT_FALSE(parsed) << bad;
    EXPECT_TRUE(parsed.error().usage);
  }
}

TEST(SameSecret, ComparesWholeStringsOfAnyLength)
{
  EXPECT_TRUE(same_secret("s3cret", "s3cret"));
  EXPECT_FALSE(same_secret("s3cret", "s3creT"));
  EXPECT_FALSE(same_secret("s3cret", "s3cret!"));
  EXPECT_FALSE(same_secret("s3cret", ""));
  EXPECT_FALSE(same_secret(std::string("a\0b", 3), std::string("a\0c", 3)));
}

TEST(HttpServer, AnswersGetsWithTheDecodedPathAndQueryAndRefusesOtherMethods)
{
  auto server = echo_server();
  ASSERT_TRUE(server);
  ASSERT_NE(server->port(), 0);
  std::string answer = http_get(server->port(), "/pprof/a%20b?from=-1h&to=%40123");
  EXPECT_EQ(http_status(answer), 200) << answer;
  EXPECT_EQ(http_body(answer), "/pprof/a b from=-1h to=@123");
  EXPECT_NE(answer.find("X-Content-Type-Options: nosniff"), std::string::npos) << answer;
  EXPECT_EQ(http_status(http_exchange(server->port(), "DELETE /x HTTP/1.1\r\nHost: localhost\r\n"
                                                      "Connection: close\r\n\r\n")),
            405);
  // A body is not read: the request is refused.
  std::string with_body =
      http_exchange(server->port(), "GET /x HTTP/1.1\r\nHost: localhost\r\nContent-Length: "
                                    "5\r\nConnection: close\r\n\r\nhello");
  EXPECT_EQ(http_status(with_body), 413) << with_body;
}

TEST(HttpServer, TokenIsRequiredWhenSet)
{
  HttpServerOptions options;
  options.token = "the-token";
  auto server = echo_server(options);
  ASSERT_TRUE(server);
  EXPECT_EQ(http_status(http_get(server->port(), "/metrics")), 401);
  std::string wrong = http_get(server->port(), "/metrics", "Authorization: Bearer the-tokeN\r\n");
  EXPECT_EQ(http_status(wrong), 401);
  EXPECT_NE(wrong.find("WWW-Authenticate: Bearer"), std::string::npos) << wrong;
  EXPECT_EQ(
      http_status(http_get(server->port(), "/metrics", "Authorization: Bearer the-token-\r\n")),
      401);
  EXPECT_EQ(http_status(http_get(server->port(), "/metrics", "Authorization: Basic the-token\r\n")),
            401);
  EXPECT_EQ(
      http_status(http_get(server->port(), "/metrics", "Authorization: Bearer the-token\r\n")),
      200);
  EXPECT_EQ(
      http_status(http_get(server->port(), "/metrics", "Authorization: bearer  the-token \r\n")),
      200);
}

TEST(HttpServer, AHugeRequestLineIsRefusedAndTheNextRequestAnswered)
{
  auto server = echo_server();
  ASSERT_TRUE(server);
  // 10 MB of request line: refused once the connection's memory is full, never read whole.
  std::string huge = "GET /" + std::string(10 << 20, 'a') + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
  std::string answer = http_exchange(server->port(), huge);
  int status = http_status(answer);
  EXPECT_TRUE(status == 414 || status == 0) << answer.substr(0, 200);
  std::string headers = "GET / HTTP/1.1\r\nHost: localhost\r\n";
  for (int i = 0; i < 2000; ++i)
    headers += "X-Filler-" + std::to_string(i) + ": " + std::string(40, 'x') + "\r\n";
  answer = http_exchange(server->port(), headers + "\r\n");
  status = http_status(answer);
  EXPECT_TRUE(status == 431 || status == 0) << answer.substr(0, 200);
  EXPECT_EQ(http_status(http_get(server->port(), "/after")), 200);
}

TEST(HttpServer, TwoThousandSlowConnectionsLeaveAnotherClientAnsweredWithinASecond)
{
  // More connections than the server takes at once (2048), each trickling its headers.
  rlimit files{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &files), 0);
  files.rlim_cur = std::max<rlim_t>(files.rlim_cur, std::min<rlim_t>(files.rlim_max, 8192));
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &files), 0);
  ASSERT_GE(files.rlim_cur, 4096u) << "the test needs 4096 descriptors";
  HttpServerOptions options;
  options.idle_timeout_seconds = 30; // longer than the test: none is timed out
  auto server = echo_server(options);
  ASSERT_TRUE(server);
  std::vector<UniqueFd> slow;
  for (int i = 0; i < 2100; ++i) {
    UniqueFd fd = testing::connect_loopback(server->port(), "127.0.0.2");
    ASSERT_TRUE(fd.valid()) << "client " << i;
    testing::send_all(fd.get(), "GET /slow HTTP/1.1\r\nHost: "); // and a byte now and then
    slow.push_back(std::move(fd));
  }
  for (auto& fd : slow)
    testing::send_all(fd.get(), "l");
  auto started = std::chrono::steady_clock::now();
  std::string answer = http_get(server->port(), "/good");
  EXPECT_EQ(http_status(answer), 200) << answer;
  EXPECT_EQ(http_body(answer), "/good");
  EXPECT_LT(std::chrono::steady_clock::now() - started, 1s);
}

TEST(HttpServer, HeadersNotInByTheDeadlineCloseTheConnection)
{
  HttpServerOptions options;
  options.idle_timeout_seconds = 30;
  options.headers_deadline = 500ms;
  auto server = echo_server(options);
  ASSERT_TRUE(server);
  UniqueFd trickling = testing::connect_loopback(server->port());
  ASSERT_TRUE(trickling.valid());
  auto started = std::chrono::steady_clock::now();
  // A byte every 100 ms: never idle, never done.
  std::string closed_after;
  for (char c : std::string("GET /trickle HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")) {
    testing::send_all(trickling.get(), std::string_view(&c, 1));
    std::this_thread::sleep_for(100ms);
    pollfd ready{trickling.get(), POLLIN | POLLRDHUP, 0};
    if (::poll(&ready, 1, 0) == 1) {
      char byte;
      if (::recv(trickling.get(), &byte, 1, MSG_DONTWAIT) <= 0)
        break;
    }
  }
  auto lasted = std::chrono::steady_clock::now() - started;
  EXPECT_LT(lasted, 2s) << "the connection stayed open";
  EXPECT_GE(lasted, 400ms);
  // One whose headers came in time is answered, and a kept-alive connection has the deadline
  // again for its next request.
  UniqueFd prompt = testing::connect_loopback(server->port());
  testing::send_all(prompt.get(), "GET /prompt HTTP/1.1\r\nHost: localhost\r\n\r\n");
  std::string answer;
  char buffer[4096];
  for (int i = 0; i < 50 && answer.find("/prompt") == std::string::npos; ++i) {
    pollfd ready{prompt.get(), POLLIN, 0};
    if (::poll(&ready, 1, 100) == 1) {
      ssize_t got = ::recv(prompt.get(), buffer, sizeof buffer, 0);
      if (got <= 0)
        break;
      answer.append(buffer, static_cast<size_t>(got));
    }
  }
  EXPECT_EQ(http_status(answer), 200) << answer;
  EXPECT_EQ(testing::read_all(prompt.get(), 3s), "") << "closed by the deadline, with no answer";
}

TEST(HttpServer, ForeignHostIsMisdirectedAndAnotherOriginRefused)
{
  auto server = echo_server();
  ASSERT_TRUE(server);
  std::string port = std::to_string(server->port());
  auto status_with = [&](const std::string& headers) {
    return http_status(http_exchange(server->port(), "GET /metrics HTTP/1.1\r\n" + headers +
                                                         "Connection: close\r\n\r\n"));
  };
  for (const std::string& host : std::vector<std::string>{
           "localhost", "localhost:" + port, "127.0.0.1:" + port, "127.1.2.3", "[::1]:" + port})
    EXPECT_EQ(status_with("Host: " + host + "\r\n"), 200) << host;
  // A page whose name was rebound to 127.0.0.1 sends its own name.
  for (const std::string& host :
       std::vector<std::string>{"attacker.example", "attacker.example:" + port,
                                "localhost.attacker.example", "127.0.0.1.nip.io"})
    EXPECT_EQ(status_with("Host: " + host + "\r\n"), 421) << host;
  EXPECT_EQ(
      status_with("Host: localhost:" + port + "\r\nOrigin: http://localhost:" + port + "\r\n"),
      200);
  for (const char* origin : {"http://attacker.example", "null", "http://localhost:1"})
    EXPECT_EQ(
        status_with("Host: localhost:" + port + "\r\nOrigin: " + std::string(origin) + "\r\n"), 403)
        << origin;
}

TEST(HttpServer, EveryAnswerCarriesAPolicyAndAFlameGraphAllowsItsOwnScriptAlone)
{
  testing::TempDir dir;
  auto server = one_dump_server(dir);
  ASSERT_TRUE(server);
  uint16_t port = server->port();
  for (const char* path : {"/metrics", "/targets", "/folded/web", "/pprof/web", "/nowhere"}) {
    std::string answer = http_get(port, path);
    EXPECT_NE(answer.find("Content-Security-Policy: default-src 'none'; frame-ancestors 'none'"),
              std::string::npos)
        << path << "\n"
        << answer.substr(0, 400);
  }
  std::string svg = http_get(port, "/svg/web");
  ASSERT_EQ(http_status(svg), 200) << svg.substr(0, 400);
  std::string policy = "Content-Security-Policy: " + flame_graph_policy() + "\r\n";
  EXPECT_NE(svg.find(policy), std::string::npos) << svg.substr(0, 600);
  EXPECT_NE(flame_graph_policy().find("script-src 'sha256-"), std::string::npos);
  // The hash is of the script element's text as the document holds it.
  std::string body = http_body(svg);
  std::string open = "<script type=\"text/ecmascript\"><![CDATA[";
  auto script = body.find(open);
  ASSERT_NE(script, std::string::npos);
  EXPECT_EQ(
      body.compare(script + open.size(), emit::svg_script_text().size(), emit::svg_script_text()),
      0);
  std::string page = http_get(port, "/");
  EXPECT_NE(page.find("Content-Security-Policy: default-src 'self'"), std::string::npos);
}

TEST(HttpServer, ClientsThatHangUpWhileTheirSecondsRunFreeTheirPlacesWithinASecond)
{
  testing::TempDir dir;
  ProfileRoutesOptions routes;
  routes.output_dir = dir.path();
  auto live = std::make_shared<LiveProfiles>();
  live->target_added("db");
  HttpServerOptions options;
  options.max_connections_per_address = 2 * LiveProfiles::kMaxWaiting; // one client, all places
  auto server = HttpServer::start(options, ProfileRoutes(routes, nullptr, live));
  ASSERT_TRUE(server) << server.error().message;
  uint16_t port = (*server)->port();
  const std::string ask = "GET /pprof/db?seconds=600 HTTP/1.1\r\nHost: localhost\r\n\r\n";
  auto wait_for_waiting = [&](size_t count, std::chrono::milliseconds limit) {
    auto until = std::chrono::steady_clock::now() + limit;
    while (live->waiting() != count && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(10ms);
    return live->waiting() == count;
  };
  std::vector<UniqueFd> clients;
  for (size_t i = 0; i < LiveProfiles::kMaxWaiting; ++i) {
    clients.push_back(testing::connect_loopback(port));
    testing::send_all(clients.back().get(), ask);
  }
  ASSERT_TRUE(wait_for_waiting(LiveProfiles::kMaxWaiting, 5s)) << live->waiting();
  EXPECT_EQ(http_status(http_get(port, "/pprof/db?seconds=600")), 503);
  clients.clear(); // every one hangs up
  EXPECT_TRUE(wait_for_waiting(0, 1s)) << live->waiting() << " still held";
  UniqueFd next = testing::connect_loopback(port);
  testing::send_all(next.get(), ask);
  EXPECT_TRUE(wait_for_waiting(1, 1s)) << "the next was not taken";
}

TEST(HttpServer, EncodedTraversalInProfileNamesIsNotFound)
{
  testing::TempDir dir;
  auto server = one_dump_server(dir);
  ASSERT_TRUE(server);
  uint16_t port = server->port();
  for (const char* target :
       {"/folded/%2e%2e%2f%2e%2e%2fetc%2fpasswd", "/folded/..%2F..%2Fetc%2Fpasswd",
        "/folded/%252e%252e%252fetc", "/folded/web%2F..%2Fweb", "/folded/../../../etc/passwd",
        "/svg/%2E%2E/%2E%2E/etc/passwd"}) {
    std::string answer = http_get(port, target);
    EXPECT_EQ(http_status(answer), 404) << target << "\n" << answer;
    EXPECT_EQ(answer.find("root:"), std::string::npos) << target;
  }
  std::string good = http_get(port, "/folded/web");
  EXPECT_EQ(http_status(good), 200) << good;
  EXPECT_EQ(http_body(good), "a;b 1\n");
}

// A server with one handler thread whose /later requests are deferred: their Replies are kept in
// replies, to be given by the test.
struct DeferringServer {
  std::mutex mutex;
  std::vector<Reply> replies;
  std::unique_ptr<HttpServer> server;

  DeferringServer()
  {
    HttpServerOptions options;
    options.max_handlers = 1; // a deferred request that held it would hold every other
    auto started = HttpServer::start(options, [this](const HttpRequest& request) {
      if (request.path != "/later")
        return plain_text(200, "now");
      HttpResponse response;
      response.deferred = [this](Reply reply) {
        std::lock_guard lock(mutex);
        replies.push_back(std::move(reply));
      };
      return response;
    });
    EXPECT_TRUE(started) << (started ? "" : started.error().message);
    if (started)
      server = std::move(*started);
  }

  size_t waiting()
  {
    std::lock_guard lock(mutex);
    return replies.size();
  }

  bool wait_for(size_t count)
  {
    for (int i = 0; i < 500 && waiting() < count; ++i)
      std::this_thread::sleep_for(10ms);
    return waiting() >= count;
  }
};

TEST(HttpServer, DeferredAnswersHoldNoThreadAndComeFromAnotherThread)
{
  DeferringServer deferring;
  ASSERT_TRUE(deferring.server);
  uint16_t port = deferring.server->port();
  std::string late_answer;
  std::thread client([&] { late_answer = http_get(port, "/later"); });
  ASSERT_TRUE(deferring.wait_for(1));
  // The one handler thread is free while /later waits.
  EXPECT_EQ(http_body(http_get(port, "/now")), "now\n");
  std::thread([&] {
    std::lock_guard lock(deferring.mutex);
    deferring.replies[0]([] { return plain_text(200, "late"); });
    deferring.replies[0]([] { return plain_text(200, "twice"); }); // only the first counts
  }).join();
  client.join();
  EXPECT_EQ(http_status(late_answer), 200) << late_answer;
  EXPECT_EQ(http_body(late_answer), "late\n");
}

TEST(HttpServer, RequestsStillWaitingAreAnswered503AtTheStop)
{
  auto deferring = std::make_unique<DeferringServer>();
  ASSERT_TRUE(deferring->server);
  uint16_t port = deferring->server->port();
  std::vector<std::string> answers(3);
  std::vector<std::thread> clients;
  for (auto& answer : answers)
    clients.emplace_back([&answer, port] { answer = http_get(port, "/later"); });
  ASSERT_TRUE(deferring->wait_for(3));
  deferring->server.reset();
  for (auto& client : clients)
    client.join();
  for (const auto& answer : answers)
    EXPECT_EQ(http_status(answer), 503) << answer;
  // A Reply given after the stop does nothing.
  for (auto& reply : deferring->replies)
    reply([] { return plain_text(200, "too late"); });
}

TEST(HttpServer, APortInUseIsAnError)
{
  auto first = echo_server();
  ASSERT_TRUE(first);
  HttpServerOptions options;
  options.address.port = first->port();
  auto second = HttpServer::start(options, [](const HttpRequest&) { return HttpResponse{}; });
  ASSERT_FALSE(second);
  EXPECT_NE(second.error().message.find("cannot listen on 127.0.0.1:"), std::string::npos)
      << second.error().message;
}

} // namespace
} // namespace flamebpf::serve
