#include "pipeline/dump_sink.h"

#include <unordered_map>

#include "common/file_content.h"
#include "common/log.h"
#include "common/text.h"
#include "serve/profile_routes.h"

namespace flamebpf::pipeline {
namespace {

// The age of the JIT perf maps of the processes in interval, with their targets.
std::vector<dumps::PerfMapAge> perf_map_ages(const symbolize::Symbolizer& symbolizer,
                                             const profile::SymbolizedProfile& interval)
{
  std::unordered_map<uint32_t, std::string> targets;
  for (const auto& stack : interval.stacks)
    targets.try_emplace(stack.pid, stack.target);
  std::vector<dumps::PerfMapAge> ages;
  auto now = dumps::Clock::now();
  for (const auto& map : symbolizer.perf_maps()) {
    auto target = targets.find(map.pid);
    if (target == targets.end())
      continue;
    std::chrono::duration<double> age = now - map.modified;
    ages.push_back({map.pid, target->second, age.count()});
  }
  return ages;
}

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
             std::shared_ptr<serve::LiveProfiles> live)
{
  auto address = serve::parse_listen_address(config.listen);
  if (!address)
    return fail(address.error());
  serve::HttpServerOptions options;
  options.address = *address;
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

Result<std::unique_ptr<DumpSink>> DumpSink::open(const cli::Config& config)
{
  dumps::DumpOptions options;
  options.directory = config.output_dir;
  options.formats = config.formats;
  options.retention = config.retention;
  options.diff_previous = config.diff_previous;
  options.svg = config.graph;
  options.svg.target_frame = config.target_frame;
  auto writer = dumps::DumpWriter::open(std::move(options));
  if (!writer)
    return fail(writer.error());
  auto interval = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(config.interval_seconds));
  std::unique_ptr<DumpSink> sink(new DumpSink(std::move(*writer), interval));
  if (!config.listen.empty()) {
    sink->metrics_ = std::make_shared<dumps::Metrics>();
    sink->live_ = std::make_shared<serve::LiveProfiles>();
    auto server = start_server(config, sink->metrics_, sink->live_);
    if (!server)
      return fail(server.error());
    sink->server_ = std::move(*server);
  }
  return sink;
}

DumpSink::DumpSink(dumps::DumpWriter writer, std::chrono::nanoseconds interval)
    : writer_(std::move(writer)), interval_(interval)
{
}

void DumpSink::targets_added(const std::vector<target::Target>& added)
{
  targets_ += added.size();
  if (live_) {
    for (const auto& target : added)
      live_->target_added(target.name);
  }
}

void DumpSink::targets_removed(const std::vector<target::Target>& removed)
{
  if (live_) {
    for (const auto& target : removed)
      live_->target_removed(target.name);
  }
}

void DumpSink::drained(const profile::SymbolizedProfile& part)
{
  if (live_)
    live_->drained(part, std::chrono::steady_clock::now());
}

std::optional<std::chrono::steady_clock::time_point> DumpSink::drain_wanted_by() const
{
  return live_ ? live_->drain_wanted_by() : std::nullopt;
}

void DumpSink::started()
{
  usage_before_ = dumps::own_usage();
}

Result<> DumpSink::consume(const profile::SymbolizedProfile& interval,
                           const IntervalContext& context)
{
  ++intervals_;
  dumps::DumpReport report = writer_.write(interval, context.window);
  files_ += report.files;
  dumps::IntervalStats stats;
  stats.window = context.window;
  stats.profile = &interval;
  stats.perf_maps = perf_map_ages(context.symbolizer, interval);
  stats.usage = dumps::own_usage();
  auto kernel_maps = context.sampler.occupancy();
  stats.occupancy = {kernel_maps.known_images,       kernel_maps.cgroup_targets,
                     kernel_maps.pid_targets,        context.symbolizer.processes(),
                     context.symbolizer.elf_files(), context.symbolizer.symbol_bytes()};
  stats.interval_cpu_seconds = stats.usage.cpu_seconds - usage_before_.cpu_seconds;
  usage_before_ = stats.usage;
  stats.files_written = report.files;
  stats.dumps_pending = report.pending;
  spdlog::info("{}", dumps::summary_line(stats));
  if (metrics_)
    metrics_->add(stats);
  auto appended = writer_.append_stats(dumps::stats_json(stats));
  // A full disk is said once per interval; sampling goes on and the writes are retried.
  if (!report.error.empty())
    spdlog::error("{}; {} intervals kept in memory, retried at the next one", report.error,
                  report.pending);
  else if (!appended && appended.error().message != stats_failure_)
    spdlog::error("{}", appended.error().message);
  // A stats file that stays unwritable (a FIFO in its place) is said once, not every interval.
  stats_failure_ = appended ? "" : appended.error().message;
  return {};
}

Result<> DumpSink::finish(RecordSummary& summary)
{
  if (live_)
    live_->clear(); // the server answers them as it stops
  dumps::DumpReport last = writer_.flush();
  files_ += last.files;
  if (!last.error.empty())
    spdlog::error("{}; the dumps of {} intervals are lost", last.error, last.pending);
  summary.output_dir = writer_.options().directory;
  summary.intervals = intervals_;
  summary.dump_files = files_;
  summary.targets = targets_;
  return {};
}

} // namespace flamebpf::pipeline
