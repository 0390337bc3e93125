// Frame colours: flamegraph.pl's java palette by frame kind, with a hue fixed by the function's
// name, so the same function has the same colour in every file.
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

// "rgb(r,g,b)".
std::string css_colour(Rgb colour);

} // namespace flamebpf::emit
