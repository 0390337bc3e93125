#include "serve/page_routes.h"

#include <cerrno>
#include <fcntl.h>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/text.h"
#include "common/unique_fd.h"
#include "dumps/dump_files.h"
#include "dumps/dump_merge.h"
#include "dumps/dump_writer.h"
#include "dumps/stats.h"
#include "emit/diff_folded.h"
#include "emit/flame_tree.h"
#include "serve/content_policies.h"
#include "serve/profile_routes.h"
#include "serve/target_directories.h"

// The page's files, embedded by serve/page/resources.S.
extern "C" const char flamebpf_page_html_start[];
extern "C" const char flamebpf_page_html_end[];
extern "C" const char flamebpf_page_script_start[];
extern "C" const char flamebpf_page_script_end[];
extern "C" const char flamebpf_page_style_start[];
extern "C" const char flamebpf_page_style_end[];

namespace flamebpf::serve {
namespace {

// A stats line holds one interval; longer than this, it is no line flamebpf wrote.
constexpr size_t kMaxStatsLine = 4u << 20;

HttpResponse embedded(const char* start, const char* end, const char* content_type)
{
  HttpResponse response;
  response.content_type = content_type;
  response.body.assign(start, end);
  return response;
}

// The last max_bytes of the stats file, from the start of a line; cut if older lines are left
// out. Empty if there is no such regular file.
struct StatsTail {
  std::string text;
  bool cut = false;
};

StatsTail read_stats_tail(const std::string& path, uint64_t max_bytes)
{
  StatsTail tail;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY));
  struct stat status {};
  if (!fd.valid() || ::fstat(fd.get(), &status) != 0 || !S_ISREG(status.st_mode))
    return tail;
  auto size = static_cast<uint64_t>(status.st_size);
  uint64_t offset = size > max_bytes ? size - max_bytes : 0;
  tail.text.resize(size - offset);
  size_t read = 0;
  while (read < tail.text.size()) {
    ssize_t got = ::pread(fd.get(), tail.text.data() + read, tail.text.size() - read,
                          static_cast<off_t>(offset + read));
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      break;
    read += static_cast<size_t>(got);
  }
  tail.text.resize(read);
  if (offset > 0) {
    // The budget starts inside a line: the rest of it is no whole line.
    tail.cut = true;
    size_t newline = tail.text.find('\n');
    tail.text.erase(0, newline == std::string::npos ? tail.text.size() : newline + 1);
  }
  return tail;
}

// Milliseconds since the epoch of the stats time at key ("2026-11-22T16:20:00.250Z"); -1 if
// there is none.
int64_t stats_time_ms(const nlohmann::json& stats, const char* key)
{
  auto value = stats.find(key);
  if (value == stats.end() || !value->is_string())
    return -1;
  const auto& text = value->get_ref<const std::string&>();
  if (text.size() < 19 || text[4] != '-')
    return -1;
  auto seconds =
      dumps::parse_time(std::string_view(text).substr(0, 19), dumps::Clock::time_point());
  if (!seconds || seconds->time_since_epoch().count() < 0)
    return -1;
  int64_t millis = 0;
  std::string_view rest = std::string_view(text).substr(19);
  if (rest.starts_with('.')) {
    auto fraction = text::parse_number<int64_t>(rest.substr(1, 3));
    if (rest.size() < 4 || !fraction || *fraction < 0)
      return -1;
    millis = *fraction;
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(seconds->time_since_epoch())
             .count() +
         millis;
}

std::string readable(const dumps::Window& window)
{
  auto start = std::chrono::floor<std::chrono::seconds>(window.start);
  auto end = std::chrono::floor<std::chrono::seconds>(window.end);
  return fmt::format("{:%Y-%m-%d %H:%M:%S}\xE2\x80\x93{:%H:%M:%S} UTC", start, end);
}

} // namespace

PageRoutes::PageRoutes(const ProfileRoutesOptions& options, uint64_t max_stats_bytes)
    : output_dir_(options.output_dir), svg_(options.svg), max_input_bytes_(options.max_input_bytes),
      max_held_bytes_(options.max_held_bytes), max_response_bytes_(options.max_response_bytes),
      max_stats_bytes_(max_stats_bytes)
{
}

std::optional<HttpResponse> PageRoutes::operator()(const HttpRequest& request) const
{
  const std::string& path = request.path;
  if (path == "/") {
    HttpResponse page =
        embedded(flamebpf_page_html_start, flamebpf_page_html_end, "text/html; charset=utf-8");
    page.headers["Content-Security-Policy"] = kPagePolicy;
    page.headers["Referrer-Policy"] = "no-referrer";
    return page;
  }
  if (path == "/page.js")
    return embedded(flamebpf_page_script_start, flamebpf_page_script_end,
                    "text/javascript; charset=utf-8");
  if (path == "/page.css")
    return embedded(flamebpf_page_style_start, flamebpf_page_style_end, "text/css; charset=utf-8");
  if (path == "/timeline")
    return timeline();
  constexpr std::string_view kDiff = "/diff/";
  if (path.starts_with(kDiff))
    return diff(std::string_view(path).substr(kDiff.size()), request);
  return std::nullopt;
}

HttpResponse PageRoutes::timeline() const
{
  StatsTail tail = read_stats_tail(output_dir_ + "/" + dumps::kStatsFileName, max_stats_bytes_);
  // Windows in time order, each with its samples by target. A window written twice (a restart
  // within it) is summed.
  std::map<std::pair<int64_t, int64_t>, std::map<std::string, uint64_t>> windows;
  uint64_t skipped = 0;
  std::string_view text = tail.text;
  // Only whole lines: the last one may be being written.
  for (size_t end; (end = text.find('\n')) != std::string_view::npos; text.remove_prefix(end + 1)) {
    std::string_view line = text.substr(0, end);
    if (line.empty())
      continue;
    if (line.size() > kMaxStatsLine) {
      ++skipped;
      continue;
    }
    auto stats = nlohmann::json::parse(line, nullptr, false);
    if (stats.is_discarded() || !stats.is_object()) {
      ++skipped;
      continue;
    }
    int64_t start = stats_time_ms(stats, "start");
    int64_t finish = stats_time_ms(stats, "end");
    auto targets = stats.find("targets");
    if (start < 0 || finish < start || targets == stats.end() || !targets->is_object()) {
      ++skipped;
      continue;
    }
    auto& window = windows[{start, finish}];
    for (const auto& [name, target] : targets->items()) {
      if (!target.is_object())
        continue;
      auto samples = target.find("samples");
      if (samples != target.end() && samples->is_number_unsigned())
        window[name] += samples->get<uint64_t>();
    }
  }

  std::set<std::string> directories;
  for (auto& name : subdirectories(output_dir_))
    directories.insert(std::move(name));
  std::map<std::string, std::vector<std::pair<size_t, uint64_t>>> targets;
  std::string json = "{\"windows\":[";
  size_t index = 0;
  for (const auto& [window, samples] : windows) {
    json += fmt::format("{}[{},{}]", index == 0 ? "" : ",", window.first, window.second);
    for (const auto& [name, count] : samples)
      targets[name].emplace_back(index, count);
    ++index;
  }
  json += "],\"targets\":[";
  bool first = true;
  for (const auto& [name, samples] : targets) {
    std::string directory = dumps::target_directory(name);
    json += fmt::format("{}{{\"name\":{},\"directory\":{},\"samples\":[", first ? "" : ",",
                        dumps::json_string(name),
                        directories.contains(directory) ? dumps::json_string(directory) : "null");
    first = false;
    for (size_t i = 0; i < samples.size(); ++i)
      json += fmt::format("{}[{},{}]", i == 0 ? "" : ",", samples[i].first, samples[i].second);
    json += "]}";
  }
  json += fmt::format("],\"skipped_lines\":{},\"cut\":{}}}\n", skipped, tail.cut);
  HttpResponse response;
  response.content_type = "application/json";
  response.body = std::move(json);
  return response;
}

HttpResponse PageRoutes::diff(std::string_view target, const HttpRequest& request) const
{
  auto directory = find_target_directory(output_dir_, target);
  if (!directory)
    return plain_text(404, "no target of that name has dumps here (see /targets)");
  auto now = dumps::Clock::now();
  std::optional<dumps::Clock::time_point> bounds[4];
  const char* names[4] = {"base_from", "base_to", "from", "to"};
  for (size_t i = 0; i < 4; ++i) {
    auto bound = time_bound(request, names[i], now);
    if (!bound)
      return bound.error();
    if (!*bound)
      return plain_text(400, "a diff takes two ranges: base_from=, base_to=, from= and to=");
    bounds[i] = *bound;
  }
  if (*bounds[0] > *bounds[1] || *bounds[2] > *bounds[3])
    return plain_text(400, "a range starts after it ends (base_from= after base_to=, or from= "
                           "after to=)");
  // Both ranges together sum no more than one range of /svg may.
  uint64_t budget = max_input_bytes_ / 2;
  uint64_t held = max_held_bytes_ / 2;
  auto before = dumps::merge_dumps(*directory, bounds[0], bounds[1], budget, held);
  if (!before)
    return merge_refused(before.error(), "the base range: ");
  auto after = dumps::merge_dumps(*directory, bounds[2], bounds[3], budget, held);
  if (!after)
    return merge_refused(after.error(), "the range: ");

  emit::FlameTree tree;
  tree.add_profile(before->profile, svg_.target_frame, emit::kBefore);
  tree.add_profile(after->profile, svg_.target_frame, emit::kAfter);
  uint64_t before_total = tree.total(emit::kBefore);
  uint64_t after_total = tree.total(emit::kAfter);
  // Ranges of different lengths compare by share, as `flamebpf diff --normalize` does.
  bool normalize = request.query.find("normalize") == request.query.end() ||
                   request.query.at("normalize") != "0";
  if (normalize)
    tree.scale_before(emit::normalization_factor(before_total, after_total));
  emit::SvgOptions svg = svg_;
  if (svg.title == emit::kDefaultTitle)
    svg.title = emit::kDifferentialTitle;
  svg.subtitle = fmt::format("{} \xC2\xB7 {} ({} samples) \xE2\x86\x92 {} ({} samples){} \xC2\xB7 "
                             "red grew, blue shrank",
                             target, readable(before->span), before_total, readable(after->span),
                             after_total, normalize ? ", normalized" : "");
  emit::DiffOptions diff_options;
  std::ostringstream out;
  if (auto written = emit::write_svg(tree, svg, out, &diff_options); !written) {
    spdlog::warn("--listen: diff of {}: {}", target, written.error().message);
    return plain_text(500, written.error().message);
  }
  HttpResponse response;
  response.body = std::move(out).str();
  if (response.body.size() > max_response_bytes_)
    return plain_text(400, fmt::format("the answer would be over {} MiB; ask for shorter ranges",
                                       max_response_bytes_ >> 20));
  response.content_type = "image/svg+xml; charset=utf-8";
  response.headers["Content-Security-Policy"] = flame_graph_policy();
  return response;
}

} // namespace flamebpf::serve
