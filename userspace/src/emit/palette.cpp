#include "emit/palette.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "common/hashing.h"

namespace flamebpf::emit {
namespace {

// Each variation takes this many values: a palette small enough that an SVG names its colours by
// class, with shades that still tell neighbouring frames apart.
constexpr uint64_t kLevels = 4;
// A change is shaded in this many steps.
constexpr double kDiffSteps = 20;

// Two numbers in (0, 1) that depend on the name only (FNV-1a), so hues are stable across files.
std::pair<double, double> name_variation(std::string_view name)
{
  uint64_t hash = Fnv1a().add(name).value();
  auto level = [](uint64_t bits) {
    return (static_cast<double>(bits % kLevels) + 0.5) / static_cast<double>(kLevels);
  };
  return {level(hash & 0xffff), level((hash >> 16) & 0xffff)};
}

uint8_t channel(double base, double spread, double v)
{
  return static_cast<uint8_t>(std::clamp(base + spread * v, 0.0, 255.0));
}

} // namespace

Rgb frame_colour(std::string_view name, profile::FrameKind kind)
{
  auto [v1, v2] = name_variation(name);
  switch (kind) {
  case profile::FrameKind::kJit:
    return {channel(50, 60, v1), channel(190, 55, v2), channel(50, 60, v1)};
  case profile::FrameKind::kInlined:
    return {channel(60, 60, v1), channel(195, 50, v2), channel(195, 50, v2)};
  case profile::FrameKind::kInterpreted:
    // Java's green, duller: the same methods as the compiled frames, slower.
    return {channel(120, 40, v1), channel(160, 40, v2), channel(90, 40, v1)};
  case profile::FrameKind::kKernel:
    return {channel(230, 25, v1), channel(130, 60, v2), channel(30, 40, v1)};
  case profile::FrameKind::kUnknown:
    return {channel(160, 40, v1), channel(160, 40, v1), channel(160, 40, v1)};
  case profile::FrameKind::kNative:
    break;
  }
  if (name.find("::") != std::string_view::npos)
    return {channel(200, 55, v1), channel(200, 55, v1), channel(50, 40, v2)};
  return {channel(205, 50, v1), channel(60, 110, v2), channel(50, 60, v2)};
}

Rgb diff_colour(int64_t delta, uint64_t max_delta)
{
  if (delta == 0 || max_delta == 0)
    return {250, 250, 250};
  double share = std::min(1.0, static_cast<double>(delta < 0 ? -delta : delta) /
                                   static_cast<double>(max_delta));
  share = std::ceil(share * kDiffSteps) / kDiffSteps;
  // Even a small change shows a tint, so that it can be told from no change at all.
  auto faded = static_cast<uint8_t>(220 - 200 * share);
  return delta > 0 ? Rgb{255, faded, faded} : Rgb{faded, faded, 255};
}

std::string css_colour(Rgb colour)
{
  return fmt::format("#{:02x}{:02x}{:02x}", colour.r, colour.g, colour.b);
}

} // namespace flamebpf::emit
