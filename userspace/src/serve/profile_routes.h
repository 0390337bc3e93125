// What --listen answers in agent mode, from what the agent already writes: its dumps, summed over
// a range of time, as pprof (as Go's net/http/pprof serves it, for Pyroscope's and Parca's
// scrapers and `go tool pprof`), folded stacks or SVG, and its statistics as Prometheus metrics.
//   GET /metrics
//   GET /targets                     the targets with dumps, as JSON
//   GET /pprof/<target>?from=&to=    likewise /folded/<target> and /svg/<target>
//   GET /pprof/<target>?seconds=N    the next N seconds, as they are sampled
//   GET /pprof?seconds=N             the same of every target, labelled by target
//   GET /, /timeline, /diff/<target> the web page and what it asks for (serve/page_routes.h)
// A target is named as its directory in the output directory is; the name is looked up among
// those directories and the targets being recorded, never used as a path. from and to take what
// `flamebpf merge` takes; with neither, the last window is served.
#pragma once

#include <chrono>
#include <cstdint>
#include <expected>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/result.h"
#include "dumps/dump_files.h"
#include "dumps/metrics.h"
#include "emit/formats.h"
#include "emit/svg.h"
#include "serve/heavy_answers.h"
#include "serve/http_server.h"
#include "serve/live_profiles.h"
#include "serve/page_routes.h"

namespace flamebpf::serve {

struct ProfileRoutesOptions {
  std::string output_dir;
  emit::SvgOptions svg;
  // What one answer may read (the folded dumps' sizes, known before any is read), hold (the
  // distinct stacks summed) and give: a request for a long range of a busy target is refused
  // rather than held in memory, and the answers are made one at a time (HeavyAnswers), so that
  // requests cost at most these together.
  uint64_t max_input_bytes = 256ull << 20;
  uint64_t max_held_bytes = 48ull << 20;
  uint64_t max_response_bytes = 32ull << 20;
};

// The time bound name= of request, as `flamebpf merge` takes it: none if the request has none, or
// the 400 to answer if it is no time.
std::expected<std::optional<dumps::Clock::time_point>, HttpResponse>
time_bound(const HttpRequest& request, const char* name, dumps::Clock::time_point now);

// The answer to a request whose dumps could not be summed: 400 if the range is too large to sum
// (EFBIG), else 404.
HttpResponse merge_refused(const Error& error, const std::string& what = "");

class ProfileRoutes {
public:
  // live answers ?seconds=; without it, such requests are refused.
  ProfileRoutes(ProfileRoutesOptions options,
                std::shared_ptr<const dumps::Metrics> metrics,
                std::shared_ptr<LiveProfiles> live = nullptr);

  HttpResponse operator()(const HttpRequest& request) const;

private:
  HttpResponse targets() const;
  // A range's profile: checked here, summed and rendered by heavy_ in its turn.
  HttpResponse
  profile(std::string_view format, std::string_view target, const HttpRequest& request) const;
  // ?seconds=: an answer deferred until the seconds have been sampled.
  HttpResponse
  live_profile(emit::Format format, std::string directory, std::string_view seconds) const;

  ProfileRoutesOptions options_;
  std::shared_ptr<const dumps::Metrics> metrics_;
  std::shared_ptr<LiveProfiles> live_;
  PageRoutes page_;
  std::shared_ptr<HeavyAnswers> heavy_ = std::make_shared<HeavyAnswers>();
};

} // namespace flamebpf::serve
