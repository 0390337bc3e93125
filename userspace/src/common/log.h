// The one logger: spdlog to stderr, "flamebpf: level: message", one line per message.
//
// Messages carry names that targets choose (process and container names, file paths, perf-map
// text), so what reaches the terminal or the journal is made safe at the one place every line
// passes: control characters and bytes that are not UTF-8 are escaped, so no name can move the
// cursor, retitle a terminal or forge a second line. Warnings are rate-limited as a whole, so
// that many misbehaving targets cannot flood the log. The logger may be used from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <spdlog/spdlog.h>
#include <string>
#include <string_view>

namespace flamebpf::log {

// Sets up the logger; verbose shows debug messages, including libbpf's, and lifts the warnings'
// rate limit.
void init(bool verbose);

// Whether -v was given.
bool verbose();

// text with every byte that could act on a terminal or break a line escaped as \xHH: C0 controls,
// DEL, C1 controls (U+0080 to U+009F) and bytes that are not part of valid UTF-8. A backslash is
// doubled, so an escape in the output always means an escaped byte.
std::string printable(std::string_view text);

// At most kWarningsPerWindow warnings per kWindow; the rest are counted and summed up in one line
// when the window ends.
class WarningBudget {
public:
  using Clock = std::chrono::steady_clock;
  static constexpr uint32_t kWarningsPerWindow = 50;
  static constexpr std::chrono::seconds kWindow{60};

  // Ends the window if it is over by `now`; returns the warnings it held back (0 if none, or if
  // the window goes on).
  uint64_t roll(Clock::time_point now);
  // Whether a warning at `now` may be shown (call roll first); counts it either way.
  bool admit(Clock::time_point now);
  // Warnings held back in the current window so far.
  uint64_t suppressed() const { return suppressed_; }

private:
  Clock::time_point window_start_{};
  bool started_ = false;
  uint32_t shown_ = 0;
  uint64_t suppressed_ = 0;
};

// Writes the line about warnings held back in the current window, if any (at exit).
void flush_suppressed();

} // namespace flamebpf::log
