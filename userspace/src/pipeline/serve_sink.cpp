#include "pipeline/serve_sink.h"

#include "common/file_content.h"
#include "common/log.h"
#include "common/text.h"
#include "serve/profile_routes.h"

namespace flamebpf::pipeline {
namespace {

// The token of --listen-token-file: its first line, without surrounding blanks.
Result<std::string> read_token(const std::string& path)
{
  auto content = FileContent::read(path);
  if (!content)
    return fail(usage_error("--listen-token-file: " + content.error().message));
  std::string_view first_line = content->view();
  std::string_view token = text::trim(first_line.substr(0, first_line.find('\n')), " \t\n\v\f\r");
  if (token.empty())
    return fail(usage_error("--listen-token-file " + path + " holds no token"));
  return std::string(token);
}

// The server of --listen, answering from output_dir and metrics.
Result<std::unique_ptr<serve::HttpServer>>
start_server(const cli::Config& config,
             std::shared_ptr<const dumps::Metrics> metrics,
             std::shared_ptr<serve::LiveProfiles> live,
             std::shared_ptr<MemoryAccount> memory)
{
  auto address = serve::parse_listen_address(config.listen);
  if (!address)
    return fail(address.error());
  serve::HttpServerOptions options;
  options.address = *address;
  options.memory = std::move(memory);
  if (!config.listen_token_file.empty()) {
    auto token = read_token(config.listen_token_file);
    if (!token)
      return fail(token.error());
    options.token = std::move(*token);
  }
  // Profiles tell code and data: beyond this machine, only with a token or when told to.
  if (!address->loopback() && options.token.empty() && !config.listen_insecure)
    return fail(usage_error("--listen " + config.listen +
                            " would serve profiles beyond this machine: give "
                            "--listen-token-file, or --listen-insecure to mean it"));
  serve::ProfileRoutesOptions routes;
  routes.output_dir = config.output_dir;
  routes.svg = config.graph;
  routes.svg.target_frame = config.target_frame;
  auto server = serve::HttpServer::start(
      options, serve::ProfileRoutes(routes, std::move(metrics), std::move(live)));
  if (!server)
    return fail(server.error());
  spdlog::info("serving the dumps and metrics on http://{}{}{}:{}/{}", address->ipv6 ? "[" : "",
               address->host, address->ipv6 ? "]" : "", (*server)->port(),
               options.token.empty() ? "" : " (with a bearer token)");
  return server;
}

} // namespace

Result<std::unique_ptr<ServeSink>> ServeSink::open(const cli::Config& config,
                                                   std::chrono::nanoseconds interval,
                                                   const std::shared_ptr<MemoryAccount>& memory)
{
  std::unique_ptr<ServeSink> sink(new ServeSink(interval));
  auto server = start_server(config, sink->metrics_, sink->live_, memory);
  if (!server)
    return fail(server.error());
  sink->server_ = std::move(*server);
  return sink;
}

void ServeSink::targets_added(const std::vector<target::Target>& added)
{
  for (const auto& target : added)
    live_->target_added(target.name);
}

void ServeSink::targets_removed(const std::vector<target::Target>& removed)
{
  for (const auto& target : removed)
    live_->target_removed(target.name);
}

void ServeSink::drained(const profile::SymbolizedProfile& part)
{
  live_->drained(part, std::chrono::steady_clock::now());
}

std::optional<std::chrono::steady_clock::time_point> ServeSink::drain_wanted_by() const
{
  return live_->drain_wanted_by();
}

Result<> ServeSink::consume(const profile::SymbolizedProfile& interval, IntervalFacts& facts)
{
  (void)interval;
  if (facts.stats)
    metrics_->add(*facts.stats);
  return {};
}

Result<> ServeSink::finish(RecordSummary& summary)
{
  (void)summary;
  live_->clear(); // the server answers them as it stops
  return {};
}

} // namespace flamebpf::pipeline
