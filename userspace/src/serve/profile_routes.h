// What --listen answers in agent mode, from what the agent already writes: its dumps, summed over
// a range of time, as pprof (as Go's net/http/pprof serves it, for Pyroscope's and Parca's
// scrapers and `go tool pprof`), folded stacks or SVG, and its statistics as Prometheus metrics.
//   GET /metrics
//   GET /targets                     the targets with dumps, as JSON
//   GET /pprof/<target>?from=&to=    likewise /folded/<target> and /svg/<target>
// A target is named as its directory in the output directory is; the name is looked up among
// those directories, never used as a path. from and to take what `flamebpf merge` takes; with
// neither, the last window is served.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "dumps/metrics.h"
#include "emit/svg.h"
#include "serve/http_server.h"

namespace flamebpf::serve {

struct ProfileRoutesOptions {
  std::string output_dir;
  emit::SvgOptions svg;
  // The dump files one answer may sum, and the largest answer: a request for a long range of a
  // busy target is refused rather than held in memory.
  uint64_t max_input_bytes = 256ull << 20;
  uint64_t max_response_bytes = 64ull << 20;
};

class ProfileRoutes {
public:
  ProfileRoutes(ProfileRoutesOptions options, std::shared_ptr<const dumps::Metrics> metrics);

  HttpResponse operator()(const HttpRequest& request) const;

private:
  HttpResponse targets() const;
  HttpResponse
  profile(std::string_view format, std::string_view target, const HttpRequest& request) const;
  // The directory of target in the output directory, if one is named so.
  std::optional<std::string> directory_of(std::string_view target) const;

  ProfileRoutesOptions options_;
  std::shared_ptr<const dumps::Metrics> metrics_;
};

} // namespace flamebpf::serve
