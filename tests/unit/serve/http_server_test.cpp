#include <chrono>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/unique_fd.h"
#include "http_client.h"
#include "serve/http_server.h"
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
  EXPECT_EQ(http_status(http_exchange(server->port(), "DELETE /x HTTP/1.1\r\nHost: t\r\n"
                                                      "Connection: close\r\n\r\n")),
            405);
  // A body is not read: the request is refused.
  std::string with_body =
      http_exchange(server->port(), "GET /x HTTP/1.1\r\nHost: t\r\nContent-Length: "
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
  std::string huge = "GET /" + std::string(10 << 20, 'a') + " HTTP/1.1\r\nHost: t\r\n\r\n";
  std::string answer = http_exchange(server->port(), huge);
  int status = http_status(answer);
  EXPECT_TRUE(status == 414 || status == 0) << answer.substr(0, 200);
  std::string headers = "GET / HTTP/1.1\r\nHost: t\r\n";
  for (int i = 0; i < 2000; ++i)
    headers += "X-Filler-" + std::to_string(i) + ": " + std::string(40, 'x') + "\r\n";
  answer = http_exchange(server->port(), headers + "\r\n");
  status = http_status(answer);
  EXPECT_TRUE(status == 431 || status == 0) << answer.substr(0, 200);
  EXPECT_EQ(http_status(http_get(server->port(), "/after")), 200);
}

TEST(HttpServer, AThousandSlowClientsLeaveRoomForTheNextRequest)
{
  HttpServerOptions options;
  options.idle_timeout_seconds = 30; // longer than the test: they are not timed out
  auto server = echo_server(options);
  ASSERT_TRUE(server);
  std::vector<UniqueFd> slow;
  for (int i = 0; i < 1000; ++i) {
    UniqueFd fd = testing::connect_loopback(server->port());
    ASSERT_TRUE(fd.valid()) << "client " << i;
    testing::send_all(fd.get(), "GET /slow HTTP/1.1\r\nHost: "); // and never more
    slow.push_back(std::move(fd));
  }
  auto started = std::chrono::steady_clock::now();
  std::string answer = http_get(server->port(), "/good");
  EXPECT_EQ(http_status(answer), 200) << answer;
  EXPECT_EQ(http_body(answer), "/good");
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
}

TEST(HttpServer, EncodedTraversalInProfileNamesIsNotFound)
{
  testing::TempDir dir;
  std::filesystem::create_directory(dir.path() / "web");
  std::ofstream(dir.path() / "web" / "20261122T162000Z_20261122T162100Z.folded") << "a;b 1\n";
  ProfileRoutesOptions routes;
  routes.output_dir = dir.path();
  auto server = HttpServer::start({}, ProfileRoutes(routes, nullptr));
  ASSERT_TRUE(server) << server.error().message;
  uint16_t port = (*server)->port();
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
