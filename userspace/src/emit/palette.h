// Frame colours: flamegraph.pl's java palette by frame kind, with a shade fixed by the function's
// name, so the same function has the same colour in every file. Each kind has 16 shades and a
// change 20 steps, so that a flame graph's colours are a small palette it can name by class.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "profile/symbolized_profile.h"

namespace flamebpf::emit {

struct Rgb {
  uint8_t r = 0;
  uint8_t g = 0;
  uint8_t b = 0;
  friend bool operator==(const Rgb&, const Rgb&) = default;
};

// JIT-compiled Java green, inlined aqua, kernel orange, C++ (a "::" in the name) yellow, other
// native code red, unknown grey.
Rgb frame_colour(std::string_view name, profile::FrameKind kind);

// Differential colours: red where a frame grew, blue where it shrank, white where it did not;
// the shade by |delta| / max_delta.
Rgb diff_colour(int64_t delta, uint64_t max_delta);

// "#rrggbb".
std::string css_colour(Rgb colour);

} // namespace flamebpf::emit
