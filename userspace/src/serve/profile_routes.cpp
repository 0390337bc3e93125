#include "serve/profile_routes.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <fcntl.h>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <sstream>
#include <sys/stat.h>

#include "common/log.h"
#include "common/unique_fd.h"
#include "dumps/dump_files.h"
#include "dumps/dump_merge.h"
#include "dumps/stats.h"
#include "emit/formats.h"
#include "serve/content_policies.h"
#include "serve/target_directories.h"

namespace flamebpf::serve {
namespace {

std::string iso_time(dumps::Clock::time_point when)
{
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}Z", std::chrono::floor<std::chrono::seconds>(when));
}

// profile in format as the answer to a request for it.
HttpResponse rendered(emit::Format format,
                      const profile::SymbolizedProfile& profile,
                      const ProfileRoutesOptions& options,
                      std::string_view description)
{
  emit::SvgOptions svg = options.svg;
  svg.subtitle = emit::describe_profile(profile) + " \xC2\xB7 " + std::string(description);
  std::ostringstream out;
  if (auto written = emit::make_emitter(format, svg)->write(profile, out); !written) {
    spdlog::warn("--listen: {}: {}", description, written.error().message);
    return plain_text(500, written.error().message);
  }
  HttpResponse response;
  response.body = std::move(out).str();
  if (response.body.size() > options.max_response_bytes)
    return plain_text(400, fmt::format("the answer would be over {} MiB; ask for a shorter range",
                                       options.max_response_bytes >> 20));
  switch (format) {
  case emit::Format::kPprof:
    // As Go's net/http/pprof answers: scrapers check the type.
    response.content_type = "application/octet-stream";
    response.headers["Content-Disposition"] = "attachment; filename=\"profile\"";
    break;
  case emit::Format::kFolded:
    response.content_type = "text/plain; charset=utf-8";
    break;
  case emit::Format::kSvg:
    response.content_type = "image/svg+xml; charset=utf-8";
    response.headers["Content-Security-Policy"] = flame_graph_policy();
    break;
  }
  return response;
}

} // namespace

std::expected<std::optional<dumps::Clock::time_point>, HttpResponse>
time_bound(const HttpRequest& request, const char* name, dumps::Clock::time_point now)
{
  auto value = request.query.find(name);
  if (value == request.query.end())
    return std::nullopt;
  auto bound = dumps::parse_time(value->second, now);
  if (!bound)
    return std::unexpected(plain_text(
        400, fmt::format("{}= takes a time as flamebpf merge does (2026-11-22T16:20:00Z, "
                         "@1795000000, -30m)",
                         name)));
  return bound;
}

HttpResponse merge_refused(const Error& error, const std::string& what)
{
  return plain_text(error.errno_value == EFBIG ? 400 : 404, what + error.message);
}

ProfileRoutes::ProfileRoutes(ProfileRoutesOptions options,
                             std::shared_ptr<const dumps::Metrics> metrics,
                             std::shared_ptr<LiveProfiles> live)
    : options_(std::move(options)), metrics_(std::move(metrics)), live_(std::move(live)),
      page_(options_)
{
}

HttpResponse ProfileRoutes::operator()(const HttpRequest& request) const
{
  const std::string& path = request.path;
  if (path == "/metrics") {
    HttpResponse response;
    response.content_type = "text/plain; version=0.0.4; charset=utf-8";
    response.body = metrics_ ? metrics_->text() : "";
    return response;
  }
  if (path == "/targets")
    return targets();
  if (path == "/debug/pprof/profile") {
    // Go's net/http/pprof path, which `go tool pprof host:port` and scrapers ask for by default:
    // /pprof's answer, over 30 s when seconds= is not given, as Go's.
    auto seconds = request.query.find("seconds");
    return live_profile(emit::Format::kPprof, "",
                        seconds == request.query.end() ? "30" : seconds->second);
  }
  for (std::string_view format : {"pprof", "folded", "svg"}) {
    std::string prefix = "/" + std::string(format) + "/";
    if (path.starts_with(prefix))
      return profile(format, std::string_view(path).substr(prefix.size()), request);
    if (path == prefix.substr(0, prefix.size() - 1)) {
      // Every target at once, each sample labelled with its own: one scrape per host.
      auto seconds = request.query.find("seconds");
      if (seconds == request.query.end())
        return plain_text(400, "name a target (see /targets), or ask for every target's next "
                               "seconds with seconds=");
      return live_profile(*emit::parse_format(format), "", seconds->second);
    }
  }
  if (path.starts_with("/diff/")) {
    // Two ranges summed and drawn: in its turn.
    return heavy_->deferred([page = page_, request] {
      auto answer = page(request);
      return answer ? std::move(*answer) : plain_text(404, "not found");
    });
  }
  if (auto answer = page_(request))
    return std::move(*answer);
  return plain_text(404, "not found");
}

HttpResponse ProfileRoutes::targets() const
{
  std::string json = "[";
  for (const auto& name : subdirectories(options_.output_dir)) {
    auto dumps = dumps::list_dumps(options_.output_dir + "/" + name);
    if (dumps.empty())
      continue;
    json += fmt::format("{}{{\"name\":{},\"dumps\":{},\"from\":\"{}\",\"to\":\"{}\"}}",
                        json.size() > 1 ? "," : "", dumps::json_string(name), dumps.size(),
                        iso_time(dumps.front().window.start), iso_time(dumps.back().window.end));
  }
  HttpResponse response;
  response.content_type = "application/json";
  response.body = json + "]\n";
  return response;
}

HttpResponse ProfileRoutes::profile(std::string_view format,
                                    std::string_view target,
                                    const HttpRequest& request) const
{
  emit::Format chosen = *emit::parse_format(format);
  auto directory = find_target_directory(options_.output_dir, target);
  if (auto seconds = request.query.find("seconds"); seconds != request.query.end()) {
    if (request.query.contains("from") || request.query.contains("to"))
      return plain_text(400, "seconds= is a profile of the next seconds: it takes no from= or to=");
    // A target being recorded may have no dump yet.
    if (!directory && !(live_ && live_->recording(target)))
      return plain_text(404, "no target of that name is recorded here (see /targets)");
    return live_profile(chosen, std::string(target), seconds->second);
  }
  if (!directory)
    return plain_text(404, "no target of that name has dumps here (see /targets)");
  auto now = dumps::Clock::now();
  auto from = time_bound(request, "from", now);
  if (!from)
    return from.error();
  auto to = time_bound(request, "to", now);
  if (!to)
    return to.error();
  if (*from && *to && **from > **to)
    return plain_text(400, "from= is after to=");
  return heavy_->deferred([options = options_, chosen, directory = std::move(*directory),
                           from = *from, to = *to]() mutable {
    if (!from && !to) {
      // The last window: what the target did most recently.
      auto dumps = dumps::list_dumps(directory);
      if (dumps.empty())
        return plain_text(404, "the target has no dump yet");
      from = dumps.back().window.start;
      to = dumps.back().window.end;
    }
    // Refused from the files' sizes before any is read.
    auto merged =
        dumps::merge_dumps(directory, from, to, options.max_input_bytes, options.max_held_bytes);
    if (!merged)
      return merge_refused(merged.error());
    return rendered(chosen, merged->profile, options,
                    fmt::format("{} dumps, {}", merged->dumps, dumps::window_name(merged->span)));
  });
}

HttpResponse ProfileRoutes::live_profile(emit::Format format,
                                         std::string directory,
                                         std::string_view seconds) const
{
  if (!live_)
    return plain_text(400, "seconds= is served only while recording");
  unsigned count = 0;
  auto [end, parsed] = std::from_chars(seconds.data(), seconds.data() + seconds.size(), count);
  if (parsed != std::errc() || end != seconds.data() + seconds.size() || count == 0 ||
      count > LiveProfiles::kMaxLength.count())
    return plain_text(400, fmt::format("seconds= takes a whole number of seconds from 1 to {}",
                                       LiveProfiles::kMaxLength.count()));
  HttpResponse response;
  response.deferred = [live = live_, options = options_, format, directory = std::move(directory),
                       count](Reply reply) {
    auto done = [reply, options, format, count](profile::SymbolizedProfile profile) {
      // Rendered on the server's thread, off the recorder's time.
      reply([profile = std::move(profile), options, format, count] {
        return rendered(format, profile, options, fmt::format("the {} s asked for", count));
      });
    };
    if (!live->wait(directory, std::chrono::seconds(count), std::move(done),
                    [reply] { return reply.abandoned(); }))
      reply([] {
        HttpResponse busy = plain_text(503, "too many profiles are being taken; try again later");
        busy.headers["Retry-After"] = "10";
        return busy;
      });
  };
  return response;
}

} // namespace flamebpf::serve
