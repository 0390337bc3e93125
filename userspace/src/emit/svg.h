// Interactive SVG flame graphs, standalone (the script and style are embedded; nothing is fetched)
// and safe with any frame name: hover for details, click to zoom, search by regular expression,
// Ctrl-F. Frames narrower than a minimum width are left out of the drawing, their samples still
// counted in their parents, so that a profile of a hundred thousand stacks stays a small file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"
#include "emit/emitter.h"
#include "emit/flame_tree.h"
#include "emit/palette.h"
#include "profile/coverage.h"

namespace flamebpf::emit {

// The titles drawn unless --title names another: of a flame graph, and of a differential one.
inline constexpr const char* kDefaultTitle = "Flame Graph";
inline constexpr const char* kDifferentialTitle = "Differential Flame Graph";

struct SvgOptions {
  std::string title = kDefaultTitle;
  std::string subtitle;         // empty: a line with the sample count
  uint32_t width = 1200;        // pixels
  bool inverted = false;        // icicle graph: the root at the top
  double min_frame_width = 0.1; // pixels; narrower frames are not drawn
  bool target_frame = false;    // each stack under its target's name first
};

// How a differential flame graph is drawn.
struct DiffOptions {
  Side shape = kAfter; // the profile whose widths are drawn (--negate: kBefore)
};

// Writes the flame graph of tree's kAfter side, or with diff set, the differential graph of its
// two sides: widths from diff->shape, red where a frame grew from before to after, blue where it
// shrank, the shade by the size of the change.
//
// Each drawn frame is a <g class="f c<N>"> holding its samples (data-w; in a differential graph
// also data-b and data-a, before and after), its name (data-n), its rectangle and its label, with
// parents before children and siblings left to right; c<N> is its colour's class in the
// document's palette. The embedded script works out the rest (depths, first samples, tooltips),
// so that a frame takes few bytes.
[[nodiscard]] Result<> write_svg(const FlameTree& tree,
                                 const SvgOptions& options,
                                 std::ostream& out,
                                 const DiffOptions* diff = nullptr);

// The text of a flame graph's one script element, as a browser hashes it for a
// Content-Security-Policy ('sha256-...'): whoever serves the SVG allows that script alone.
std::string svg_script_text();

class SvgEmitter final : public Emitter {
public:
  explicit SvgEmitter(SvgOptions options) : options_(std::move(options)) {}
  // The flame graph of profile; without a subtitle, one is made from the profile: targets, time
  // range, frequency and samples.
  Result<> write(const profile::SymbolizedProfile& profile, std::ostream& out) override;

private:
  SvgOptions options_;
};

// The share of all samples a frame needs to be drawn (its minimum width over the drawable width).
double drawn_share(const SvgOptions& options);

// Text fit for XML content and attribute values: markup characters escaped, control characters
// and invalid UTF-8 replaced, cut at max_bytes (on a character boundary) with "…".
std::string xml_text(std::string_view text, size_t max_bytes = 4096);

// The label drawn in a frame width_px wide: the name, cut to fit with "..", or empty if fewer than
// three characters fit.
std::string frame_label(std::string_view name, double width_px);

// "target web · 2026-11-22 10:00:00–10:01:00 UTC · 99 Hz · 5940 samples".
std::string describe_profile(const profile::SymbolizedProfile& profile);

// The same, then how the samples cover the targets' CPU time (profile::coverage_summary):
// "target web · … · 5940 samples · coverage 98%".
std::string describe_profile(const profile::SymbolizedProfile& profile,
                             const std::vector<profile::TargetCoverage>& coverage);

} // namespace flamebpf::emit
