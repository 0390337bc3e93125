#include "serve/profile_routes.h"

#include <algorithm>
#include <cerrno>
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

namespace flamebpf::serve {
namespace {

std::string iso_time(dumps::Clock::time_point when)
{
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}Z", std::chrono::floor<std::chrono::seconds>(when));
}

// The subdirectories of directory, by name (no symbolic link, nothing else).
std::vector<std::string> subdirectories(const std::string& directory)
{
  std::vector<std::string> names;
  UniqueFd fd(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid())
    return names;
  for (auto& name : dumps::names_in(fd.get())) {
    struct stat status {};
    if (::fstatat(fd.get(), name.c_str(), &status, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISDIR(status.st_mode))
      names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());
  return names;
}

} // namespace

ProfileRoutes::ProfileRoutes(ProfileRoutesOptions options,
                             std::shared_ptr<const dumps::Metrics> metrics)
    : options_(std::move(options)), metrics_(std::move(metrics))
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
  if (path == "/")
    return plain_text(200, "flamebpf: /metrics, /targets, /pprof/<target>, /folded/<target> and "
                           "/svg/<target> (?from=&to=, as flamebpf merge takes them)");
  for (std::string_view format : {"pprof", "folded", "svg"}) {
    std::string prefix = "/" + std::string(format) + "/";
    if (path.starts_with(prefix))
      return profile(format, std::string_view(path).substr(prefix.size()), request);
  }
  return plain_text(404, "not found");
}

std::optional<std::string> ProfileRoutes::directory_of(std::string_view target) const
{
  // Looked up among the directories there are: a name from a request is never a path.
  for (const auto& name : subdirectories(options_.output_dir)) {
    if (name == target)
      return options_.output_dir + "/" + name;
  }
  return std::nullopt;
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
  auto directory = directory_of(target);
  if (!directory)
    return plain_text(404, "no target of that name has dumps here (see /targets)");
  if (request.query.contains("seconds"))
    return plain_text(400,
                      "seconds= (a profile of the next seconds) is not served yet; ask for a range "
                      "of the dumps with from= and to=");
  auto now = dumps::Clock::now();
  std::optional<dumps::Clock::time_point> from;
  std::optional<dumps::Clock::time_point> to;
  for (auto [name, bound] : {std::pair{"from", &from}, std::pair{"to", &to}}) {
    auto value = request.query.find(name);
    if (value == request.query.end())
      continue;
    *bound = dumps::parse_time(value->second, now);
    if (!*bound)
      return plain_text(
          400, fmt::format("{}= takes a time as flamebpf merge does (2026-11-22T16:20:00Z, "
                           "@1795000000, -30m)",
                           name));
  }
  if (from && to && *from > *to)
    return plain_text(400, "from= is after to=");
  if (!from && !to) {
    // The last window: what the target did most recently.
    auto dumps = dumps::list_dumps(*directory);
    if (dumps.empty())
      return plain_text(404, "the target has no dump yet");
    from = dumps.back().window.start;
    to = dumps.back().window.end;
  }
  auto merged = dumps::merge_dumps(*directory, from, to, options_.max_input_bytes);
  if (!merged)
    return plain_text(merged.error().errno_value == EFBIG ? 400 : 404, merged.error().message);
  emit::SvgOptions svg = options_.svg;
  svg.subtitle =
      emit::describe_profile(merged->profile) +
      fmt::format(" \xC2\xB7 {} dumps, {}", merged->dumps, dumps::window_name(merged->span));
  emit::Format chosen = *emit::parse_format(format);
  std::ostringstream out;
  if (auto written = emit::make_emitter(chosen, svg)->write(merged->profile, out); !written) {
    spdlog::warn("--listen: {} of {}: {}", format, target, written.error().message);
    return plain_text(500, written.error().message);
  }
  HttpResponse response;
  response.body = std::move(out).str();
  if (response.body.size() > options_.max_response_bytes)
    return plain_text(400, fmt::format("the answer would be over {} MiB; ask for a shorter range",
                                       options_.max_response_bytes >> 20));
  switch (chosen) {
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
    break;
  }
  return response;
}

} // namespace flamebpf::serve
