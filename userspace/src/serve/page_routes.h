// The web page --listen serves at /: the targets and their samples over time, a range chosen by
// dragging, the flame graph of that range and the differential flame graph of two ranges. The
// page is plain HTML, script and style embedded in the binary (serve/page/), fetches nothing from
// elsewhere, and builds its DOM from text only, so a target's name never becomes markup.
//   GET /, /page.js, /page.css     the page (a Content-Security-Policy allows only this origin)
//   GET /timeline                  samples per target per window, from the stats file, as JSON
//   GET /diff/<target>?base_from=&base_to=&from=&to=
//                                  the differential flame graph (SVG) of base against the range
// The flame graph of one range is ProfileRoutes' /svg/<target>.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "emit/svg.h"
#include "serve/http_server.h"

namespace flamebpf::serve {

struct ProfileRoutesOptions;

class PageRoutes {
public:
  // The stats file is read up to its last max_stats_bytes: a long run's file is not held whole.
  static constexpr uint64_t kMaxStatsBytes = 16ull << 20;

  explicit PageRoutes(const ProfileRoutesOptions& options,
                      uint64_t max_stats_bytes = kMaxStatsBytes);

  // The answer to the page's own paths; nullopt for any other.
  std::optional<HttpResponse> operator()(const HttpRequest& request) const;

  // /timeline's JSON:
  //   {"windows":[[start_ms,end_ms],…],            oldest first, milliseconds since the epoch
  //    "targets":[{"name":…,"directory":…|null,   the name in the stats, and its directory in
  //                                                the output directory if it has one
  //                "samples":[[window,count],…]},…], windows (indexes) with samples only
  //    "skipped_lines":N,                          lines that were no stats (malformed, too long)
  //    "cut":true|false}                           older lines left out by the byte budget
  HttpResponse timeline() const;

private:
  HttpResponse diff(std::string_view target, const HttpRequest& request) const;

  std::string output_dir_;
  emit::SvgOptions svg_;
  uint64_t max_input_bytes_;
  uint64_t max_held_bytes_;
  uint64_t max_response_bytes_;
  uint64_t max_stats_bytes_;
};

} // namespace flamebpf::serve
