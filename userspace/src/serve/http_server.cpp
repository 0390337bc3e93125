#include "serve/http_server.h"

#include <arpa/inet.h>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <map>
#include <microhttpd.h>
#include <mutex>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <set>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/capabilities.h"
#include "common/loaded_library.h"
#include "common/log.h"
#include "common/text.h"
#include "common/unique_fd.h"
#include "serve/content_policies.h"
#include "serve/local_peer.h"

namespace flamebpf::serve {
namespace {

// libmicrohttpd is loaded when a server starts (--listen), not with flamebpf
// (common/loaded_library.h): with the nine libraries it brings (gnutls's), it took over a
// millisecond of every start.
struct Libmicrohttpd {
  decltype(&MHD_add_response_header) add_response_header = nullptr;
  decltype(&MHD_create_response_from_buffer_with_free_callback_cls)
      create_response_from_buffer_with_free_callback_cls = nullptr;
  decltype(&MHD_destroy_response) destroy_response = nullptr;
  decltype(&MHD_get_connection_info) get_connection_info = nullptr;
  decltype(&MHD_get_connection_values) get_connection_values = nullptr;
  decltype(&MHD_get_daemon_info) get_daemon_info = nullptr;
  decltype(&MHD_lookup_connection_value) lookup_connection_value = nullptr;
  decltype(&MHD_queue_response) queue_response = nullptr;
  decltype(&MHD_resume_connection) resume_connection = nullptr;
  decltype(&MHD_start_daemon) start_daemon = nullptr;
  decltype(&MHD_stop_daemon) stop_daemon = nullptr;
  decltype(&MHD_suspend_connection) suspend_connection = nullptr;
};

const Result<Libmicrohttpd>& load_libmicrohttpd()
{
  static const Result<Libmicrohttpd> functions = []() -> Result<Libmicrohttpd> {
    auto loaded = LoadedLibrary::open("libmicrohttpd.so.12", "--listen");
    if (!loaded)
      return fail(loaded.error());
    Libmicrohttpd library;
    loaded->resolve(library.add_response_header, "MHD_add_response_header");
    loaded->resolve(library.create_response_from_buffer_with_free_callback_cls,
                    "MHD_create_response_from_buffer_with_free_callback_cls");
    loaded->resolve(library.destroy_response, "MHD_destroy_response");
    loaded->resolve(library.get_connection_info, "MHD_get_connection_info");
    loaded->resolve(library.get_connection_values, "MHD_get_connection_values");
    loaded->resolve(library.get_daemon_info, "MHD_get_daemon_info");
    loaded->resolve(library.lookup_connection_value, "MHD_lookup_connection_value");
    loaded->resolve(library.queue_response, "MHD_queue_response");
    loaded->resolve(library.resume_connection, "MHD_resume_connection");
    loaded->resolve(library.start_daemon, "MHD_start_daemon");
    loaded->resolve(library.stop_daemon, "MHD_stop_daemon");
    loaded->resolve(library.suspend_connection, "MHD_suspend_connection");
    if (!loaded->complete())
      return fail(error("--listen: libmicrohttpd lacks a function flamebpf calls"));
    return library;
  }();
  return functions;
}

// The library's functions; only called once a server started, so loaded.
const Libmicrohttpd& mhd()
{
  return *load_libmicrohttpd();
}

// File descriptors kept for everything else flamebpf opens (its own files, the targets' files,
// the BPF maps) when the connection limit is set from RLIMIT_NOFILE.
constexpr rlim_t kDescriptorsForTheRest = 512;
// How long the stop waits for the 503s of the requests still waiting to be sent.
constexpr auto kAnswerAtStop = std::chrono::seconds(1);
// Requests are answered at a lower priority than the pipeline's threads: serving never slows
// sampling or the dumps.
constexpr int kHandlerNice = 10;
// How often the headers' deadline and the waiting clients' hang-ups are looked at.
constexpr auto kWatchPeriod = std::chrono::milliseconds(100);

// A listening TCP socket bound to address, as libmicrohttpd would make it: the address reusable
// at once after a restart, an IPv6 one for IPv6 alone.
Result<UniqueFd> listen_on(const ListenAddress& address)
{
  auto failure = [&](int errno_value) {
    return system_error(
        errno_value, fmt::format("--listen: cannot listen on {}:{}", address.host, address.port));
  };
  int family = address.ipv6 ? AF_INET6 : AF_INET;
  UniqueFd socket(::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!socket.valid())
    return fail(failure(errno));
  int on = 1;
  ::setsockopt(socket.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in v4{};
  sockaddr_in6 v6{};
  const sockaddr* bind_to = reinterpret_cast<const sockaddr*>(&v4);
  socklen_t size = sizeof v4;
  if (address.ipv6) {
    ::setsockopt(socket.get(), IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(address.port);
    ::inet_pton(AF_INET6, address.host.c_str(), &v6.sin6_addr);
    bind_to = reinterpret_cast<const sockaddr*>(&v6);
    size = sizeof v6;
  } else {
    v4.sin_family = AF_INET;
    v4.sin_port = htons(address.port);
    ::inet_pton(AF_INET, address.host.c_str(), &v4.sin_addr);
  }
  if (::bind(socket.get(), bind_to, size) != 0 || ::listen(socket.get(), SOMAXCONN) != 0)
    return fail(failure(errno));
  return socket;
}

} // namespace

bool become_a_serving_thread()
{
  bool lowered = ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), kHandlerNice) == 0;
  ::pthread_setname_np(::pthread_self(), kServingThreadName);
  bool dropped = caps::drop_all_in_this_thread();
  if (!dropped)
    spdlog::warn("--listen: a serving thread keeps its capabilities: {}", std::strerror(errno));
  return lowered && dropped;
}

namespace {

// The host of a Host header, without its port ("[::1]:80" is "::1").
std::string_view host_name(std::string_view host)
{
  if (host.starts_with('[')) {
    auto end = host.find(']');
    return end == std::string_view::npos ? host : host.substr(1, end - 1);
  }
  return host.substr(0, host.find(':'));
}

// Whether text is a numeric IPv4 address in 127.0.0.0/8.
bool loopback_ipv4(const std::string& text)
{
  in_addr address{};
  return ::inet_pton(AF_INET, text.c_str(), &address) == 1 && (ntohl(address.s_addr) >> 24) == 127;
}

// Whether a Host header names this machine's loopback: what a local client writes, and what a
// web page that rebinds its own name to 127.0.0.1 cannot.
bool loopback_host(std::string_view host)
{
  std::string_view name = host_name(host);
  return name == "localhost" || name == "::1" || loopback_ipv4(std::string(name));
}

// What the request's Authorization header carries as a bearer token; empty if none.
std::string_view bearer_token(const char* authorization)
{
  if (!authorization)
    return {};
  std::string_view value = text::trim(authorization);
  constexpr std::string_view kScheme = "Bearer ";
  if (value.size() < kScheme.size())
    return {};
  for (size_t i = 0; i < kScheme.size(); ++i) {
    char c = value[i];
    if ((c | 0x20) != (kScheme[i] | 0x20))
      return {};
  }
  return text::trim(value.substr(kScheme.size()));
}

void log_from_the_library(void*, const char* format, va_list arguments)
{
  // Clients cause most of these (a connection reset, a request too large): debug, not warnings
  // that a hostile client could fill the log with.
  char line[512];
  std::vsnprintf(line, sizeof line, format, arguments);
  std::string_view text(line);
  while (!text.empty() && text.back() == '\n')
    text.remove_suffix(1);
  spdlog::debug("http: {}", text);
}

MHD_Result collect_query(void* cls, MHD_ValueKind, const char* key, const char* value)
{
  auto& query = *static_cast<std::map<std::string, std::string>*>(cls);
  if (key)
    query.try_emplace(key, value ? value : "");
  return MHD_YES;
}

// An answer's body while libmicrohttpd sends it, measured as an answer until it is freed.
struct SentBody {
  std::string body;
  MemoryCharge charge;
};

MHD_Result queue(MHD_Connection* connection,
                 const HttpResponse& answer,
                 const std::shared_ptr<MemoryAccount>& memory)
{
  auto* sent = new SentBody{answer.body, MemoryCharge(memory, MemoryKind::kAnswers)};
  (void)sent->charge.grow(sent->body.size()); // measured: never refused
  MHD_Response* response = mhd().create_response_from_buffer_with_free_callback_cls(
      sent->body.size(), sent->body.data(), [](void* body) { delete static_cast<SentBody*>(body); },
      sent);
  if (!response) {
    delete sent;
    return MHD_NO;
  }
  mhd().add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, answer.content_type.c_str());
  // Whatever the body, a browser must not run it as something else.
  mhd().add_response_header(response, "X-Content-Type-Options", "nosniff");
  mhd().add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  // Every answer runs nothing and is framed by nothing unless its route allows more.
  if (!answer.headers.contains("Content-Security-Policy"))
    mhd().add_response_header(response, "Content-Security-Policy", kDataPolicy);
  for (const auto& [name, value] : answer.headers)
    mhd().add_response_header(response, name.c_str(), value.c_str());
  MHD_Result queued =
      mhd().queue_response(connection, static_cast<unsigned>(answer.status), response);
  mhd().destroy_response(response);
  return queued;
}

} // namespace

struct Reply::Abandoned {
  std::atomic<bool> value = false;
};

Reply::Reply(Give give, std::shared_ptr<const Abandoned> abandoned)
    : give_(std::move(give)), abandoned_(std::move(abandoned))
{
}

bool Reply::abandoned() const
{
  return abandoned_ && abandoned_->value.load();
}

struct HttpServer::Waiting {
  MHD_Connection* connection = nullptr;
  int fd = -1;                          // the connection's, watched for a hang-up
  bool replied = false;                 // the Reply was called, or the server stopped
  std::function<HttpResponse()> answer; // what the Reply gave
  std::shared_ptr<Reply::Abandoned> abandoned = std::make_shared<Reply::Abandoned>();
};

struct HttpServer::Connections {
  using Clock = std::chrono::steady_clock;
  struct Open {
    int fd = -1;
    Clock::time_point since; // its start, or the end of its previous request
    bool headers_in = false; // the current request's headers have arrived
    bool shut = false;       // shut down for missing the deadline
  };
  // Also held while a descriptor is shut down: libmicrohttpd says a connection is closed before
  // it closes the descriptor, so none is shut down once it may be another file's.
  std::mutex mutex;
  std::map<MHD_Connection*, Open> open;
  bool stopping = false;
  std::condition_variable stop;
};

struct HttpServer::WaitingList {
  std::mutex mutex; // also held while a connection is resumed, so that none is after the stop
  bool stopped = false;
  std::set<std::shared_ptr<Waiting>> connections;
  // Answered 503 at the stop and not yet done: the stop gives them a moment to be sent.
  std::set<const Waiting*> answering;
  std::condition_variable answered;
};

namespace {

// What a request holds between libmicrohttpd's calls for it: from the headers to its end.
struct RequestState {
  std::shared_ptr<HttpServer::Waiting> waiting; // set once its answer was deferred
};

void on_completed(void* cls,
                  MHD_Connection* connection,
                  void** request_state,
                  MHD_RequestTerminationCode)
{
  auto& server = *static_cast<HttpServer*>(cls);
  auto* state = static_cast<RequestState*>(*request_state);
  if (state && state->waiting)
    server.waiting_done(*state->waiting);
  delete state;
  *request_state = nullptr;
  // A kept-alive connection's next request has the deadline again.
  auto& connections = server.connections();
  std::lock_guard lock(connections.mutex);
  if (auto open = connections.open.find(connection); open != connections.open.end()) {
    open->second.since = HttpServer::Connections::Clock::now();
    open->second.headers_in = false;
  }
}

int connection_fd(MHD_Connection* connection)
{
  const MHD_ConnectionInfo* info =
      mhd().get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
  return info ? info->connect_fd : -1;
}

void on_connection(void* cls,
                   MHD_Connection* connection,
                   void**,
                   MHD_ConnectionNotificationCode code)
{
  auto& connections = static_cast<HttpServer*>(cls)->connections();
  std::lock_guard lock(connections.mutex);
  if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
    connections.open.erase(connection);
    return;
  }
  if (int fd = connection_fd(connection); fd >= 0)
    connections.open[connection] = {.fd = fd, .since = HttpServer::Connections::Clock::now()};
}

MHD_Result on_request(void* cls,
                      MHD_Connection* connection,
                      const char* url,
                      const char* method,
                      const char*,
                      const char*,
                      size_t* upload_data_size,
                      void** request_state)
{
  auto& server = *static_cast<HttpServer*>(cls);
  if (*request_state == nullptr) {
    *request_state = new RequestState;
    {
      auto& connections = server.connections();
      std::lock_guard lock(connections.mutex);
      if (auto open = connections.open.find(connection); open != connections.open.end())
        open->second.headers_in = true;
    }
    // GET has no body: a request that announces one is refused before it is read.
    const char* length =
        mhd().lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (mhd().lookup_connection_value(connection, MHD_HEADER_KIND,
                                      MHD_HTTP_HEADER_TRANSFER_ENCODING) ||
        (length && std::string_view(length) != "0"))
      return queue(connection, plain_text(413, "a request body is not accepted"),
                   server.options().memory);
    return MHD_YES;
  }
  if (*upload_data_size != 0) {
    *upload_data_size = 0; // never: refused above
    return MHD_YES;
  }
  thread_local bool serving = become_a_serving_thread();
  (void)serving;
  auto& state = *static_cast<RequestState*>(*request_state);
  if (state.waiting) {
    // Resumed: the deferred answer is made here, on the server's thread.
    auto answer = std::move(state.waiting->answer);
    return queue(connection, answer ? answer() : plain_text(500, "no answer was given"),
                 server.options().memory);
  }
  HttpRequest request;
  request.path = url ? url : "";
  mhd().get_connection_values(connection, MHD_GET_ARGUMENT_KIND, collect_query, &request.query);
  RequestSender sender;
  sender.authorization =
      mhd().lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  sender.host = mhd().lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
  sender.origin = mhd().lookup_connection_value(connection, MHD_HEADER_KIND, "Origin");
  if (server.options().address.loopback())
    sender.local_user = local_peer_user(connection_fd(connection));
  HttpResponse response = server.answer(method ? method : "", request, sender);
  if (!response.deferred)
    return queue(connection, response, server.options().memory);
  state.waiting = std::make_shared<HttpServer::Waiting>();
  state.waiting->connection = connection;
  state.waiting->fd = connection_fd(connection);
  server.defer(state.waiting, response);
  return MHD_YES;
}

} // namespace

HttpResponse plain_text(int status, std::string body)
{
  HttpResponse response;
  response.status = status;
  response.body = std::move(body) + "\n";
  return response;
}

bool ListenAddress::loopback() const
{
  return ipv6 ? host == "::1" : loopback_ipv4(host);
}

Result<ListenAddress> parse_listen_address(const std::string& text)
{
  ListenAddress address;
  std::string_view port_text = text;
  if (auto colon = text.rfind(':'); colon != std::string::npos) {
    std::string host = text.substr(0, colon);
    port_text = std::string_view(text).substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
      address.ipv6 = true;
    }
    if (!host.empty())
      address.host = host;
  }
  unsigned port = 0;
  auto [end, parsed] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (parsed != std::errc() || end != port_text.data() + port_text.size() || port > 65535)
    return fail(usage_error("--listen " + text + ": expected ADDR:PORT, [IPv6]:PORT or PORT"));
  address.port = static_cast<uint16_t>(port);
  unsigned char bytes[sizeof(in6_addr)];
  if (::inet_pton(address.ipv6 ? AF_INET6 : AF_INET, address.host.c_str(), bytes) != 1)
    return fail(usage_error("--listen " + text + ": " + address.host +
                            " is no numeric IPv4 address or bracketed IPv6 address"));
  return address;
}

bool same_secret(const std::string& a, const std::string& b)
{
  // Every byte of the longer is compared, so the time tells the length at most.
  size_t length = std::max(a.size(), b.size());
  unsigned char difference = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < length; ++i) {
    unsigned char left = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char right = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    difference |= left ^ right;
  }
  return difference == 0;
}

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler)
    : options_(std::move(options)), handler_(std::move(handler)),
      waiting_(std::make_shared<WaitingList>()), connections_(std::make_unique<Connections>())
{
}

void HttpServer::watch_connections()
{
  become_a_serving_thread();
  for (;;) {
    {
      std::unique_lock lock(connections_->mutex);
      if (connections_->stop.wait_for(lock, kWatchPeriod,
                                      [this] { return connections_->stopping; }))
        return;
      auto now = Connections::Clock::now();
      for (auto& [connection, open] : connections_->open) {
        if (!open.headers_in && !open.shut && now - open.since > options_.headers_deadline) {
          // libmicrohttpd sees the connection end and closes it.
          ::shutdown(open.fd, SHUT_RDWR);
          open.shut = true;
        }
      }
    }
    // A waiting client that hung up frees its place now, not when its answer would be due.
    std::lock_guard lock(waiting_->mutex);
    if (waiting_->stopped)
      continue;
    for (auto it = waiting_->connections.begin(); it != waiting_->connections.end();) {
      const auto& waiting = *it;
      pollfd watched{.fd = waiting->fd, .events = POLLRDHUP, .revents = 0};
      if (waiting->fd < 0 || ::poll(&watched, 1, 0) != 1 ||
          (watched.revents & (POLLRDHUP | POLLHUP | POLLERR)) == 0) {
        ++it;
        continue;
      }
      waiting->abandoned->value = true;
      waiting->replied = true;
      waiting->answer = [] { return plain_text(499, "the client went away"); };
      mhd().resume_connection(waiting->connection);
      it = waiting_->connections.erase(it);
    }
  }
}

HttpServer::~HttpServer()
{
  if (watcher_.joinable()) {
    {
      std::lock_guard lock(connections_->mutex);
      connections_->stopping = true;
    }
    connections_->stop.notify_all();
    watcher_.join();
  }
  if (!daemon_)
    return;
  {
    std::unique_lock lock(waiting_->mutex);
    waiting_->stopped = true;
    for (const auto& waiting : waiting_->connections) {
      waiting->replied = true;
      waiting->answer = [] { return plain_text(503, "flamebpf is stopping"); };
      waiting_->answering.insert(waiting.get());
      mhd().resume_connection(waiting->connection);
    }
    waiting_->connections.clear();
    waiting_->answered.wait_for(lock, kAnswerAtStop,
                                [this] { return waiting_->answering.empty(); });
  }
  mhd().stop_daemon(daemon_);
}

void HttpServer::waiting_done(const Waiting& waiting)
{
  std::lock_guard lock(waiting_->mutex);
  if (waiting_->answering.erase(&waiting))
    waiting_->answered.notify_all();
}

void HttpServer::defer(const std::shared_ptr<Waiting>& waiting, const HttpResponse& response)
{
  {
    std::lock_guard lock(waiting_->mutex);
    if (waiting_->stopped) {
      waiting->replied = true;
      waiting->answer = [] { return plain_text(503, "flamebpf is stopping"); };
      return; // not suspended: answered at the next call
    }
    mhd().suspend_connection(waiting->connection);
    waiting_->connections.insert(waiting);
  }
  response.deferred(Reply(
      [list = waiting_, waiting](std::function<HttpResponse()> answer) {
        std::lock_guard lock(list->mutex);
        if (waiting->replied || list->stopped)
          return;
        waiting->replied = true;
        waiting->answer = std::move(answer);
        list->connections.erase(waiting);
        mhd().resume_connection(waiting->connection);
      },
      waiting->abandoned));
}

Result<std::unique_ptr<HttpServer>> HttpServer::start(HttpServerOptions options,
                                                      HttpHandler handler)
{
  if (const auto& library = load_libmicrohttpd(); !library)
    return fail(library.error());
  // Each connection holds a descriptor: the limit must leave room for the rest of flamebpf.
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0) {
    rlim_t wanted = options.max_connections + kDescriptorsForTheRest;
    if (files.rlim_cur < wanted && files.rlim_cur < files.rlim_max) {
      files.rlim_cur = std::min(wanted, files.rlim_max);
      ::setrlimit(RLIMIT_NOFILE, &files);
      ::getrlimit(RLIMIT_NOFILE, &files);
    }
    if (files.rlim_cur < wanted) {
      rlim_t room = files.rlim_cur > 2 * kDescriptorsForTheRest
                        ? files.rlim_cur - kDescriptorsForTheRest
                        : files.rlim_cur / 2;
      options.max_connections = static_cast<unsigned>(room);
      spdlog::info("--listen: at most {} connections at once (RLIMIT_NOFILE {})",
                   options.max_connections, files.rlim_cur);
    }
  }
  std::unique_ptr<HttpServer> server(new HttpServer(std::move(options), std::move(handler)));
  const HttpServerOptions& settings = server->options_;
  auto listening = listen_on(settings.address);
  if (!listening)
    return fail(listening.error());
  unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
  if (settings.address.ipv6)
    flags |= MHD_USE_IPv6;
  // The socket was bound with this thread's capabilities (a port below 1024 takes one); the
  // server's threads are started from a thread that holds none, so that they hold none from their
  // first instruction on, not from their first request. libmicrohttpd owns the socket from here.
  caps::start_thread(
      caps::Role::kNone, kServingThreadName,
      [&server, &settings, &listening, flags] {
        server->daemon_ = mhd().start_daemon(
            flags, 0, nullptr, nullptr, on_request, server.get(), MHD_OPTION_LISTEN_SOCKET,
            listening->release(), MHD_OPTION_THREAD_POOL_SIZE, std::max(1u, settings.max_handlers),
            MHD_OPTION_CONNECTION_LIMIT, settings.max_connections,
            MHD_OPTION_PER_IP_CONNECTION_LIMIT, settings.max_connections_per_address,
            MHD_OPTION_CONNECTION_TIMEOUT, settings.idle_timeout_seconds,
            MHD_OPTION_CONNECTION_MEMORY_LIMIT, settings.connection_memory,
            MHD_OPTION_EXTERNAL_LOGGER, log_from_the_library, nullptr, MHD_OPTION_NOTIFY_COMPLETED,
            on_completed, server.get(), MHD_OPTION_NOTIFY_CONNECTION, on_connection, server.get(),
            MHD_OPTION_END);
        if (server->daemon_)
          server->watcher_ = std::thread([raw = server.get()] { raw->watch_connections(); });
      })
      .join();
  if (!server->daemon_)
    return fail(error(fmt::format("--listen: cannot serve on {}:{}", settings.address.host,
                                  settings.address.port)));
  const MHD_DaemonInfo* info = mhd().get_daemon_info(server->daemon_, MHD_DAEMON_INFO_BIND_PORT);
  server->port_ = info ? info->port : settings.address.port;
  return server;
}

HttpResponse HttpServer::answer(const std::string& method,
                                const HttpRequest& request,
                                const RequestSender& sender) const
{
  bool loopback = options_.address.loopback();
  // A page whose name was rebound to 127.0.0.1 still sends its own name.
  if (loopback && sender.host && !loopback_host(sender.host))
    return plain_text(421, "this server answers requests for localhost or a loopback address");
  if (sender.origin &&
      (!sender.host || std::string_view(sender.origin) != "http://" + std::string(sender.host)))
    return plain_text(403, "requests from another origin are refused");
  if (!options_.token.empty()) {
    if (!same_secret(std::string(bearer_token(sender.authorization)), options_.token)) {
      HttpResponse response =
          plain_text(401, "a bearer token is needed (Authorization: Bearer ...)");
      response.headers["WWW-Authenticate"] = "Bearer";
      return response;
    }
  } else if (loopback && !(sender.local_user &&
                           (*sender.local_user == 0 || *sender.local_user == ::geteuid()))) {
    // The dumps' modes keep them from other users; so does the server.
    return plain_text(403, "without a token (--listen-token-file), only root and flamebpf's own "
                           "user are answered");
  }
  if (method != "GET" && method != "HEAD") {
    HttpResponse response = plain_text(405, "only GET is served");
    response.headers["Allow"] = "GET, HEAD";
    return response;
  }
  return handler_(request);
}

} // namespace flamebpf::serve
