// The files of agent mode: DIR/<target>/<UTC start>_<UTC end>.<ext>, one set per interval, with
// windows aligned to wall-clock multiples of the interval.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flamebpf::dumps {

using Clock = std::chrono::system_clock;

// The time covered by one dump.
struct Window {
  Clock::time_point start;
  Clock::time_point end;
  friend bool operator==(const Window&, const Window&) = default;
};

// "20261122T162000Z_20261122T162100Z", with milliseconds ("20261122T162000.250Z_…") when
// either end is not a whole second.
std::string window_name(const Window& window);

// The window a file name starts with (the part before the first '.' after the window), if any.
std::optional<Window> parse_window_name(std::string_view file_name);

// A target's directory name in DIR: profile::target_file_name, so that no name leaves DIR and no
// two targets share a directory.
std::string target_directory(std::string_view target);

// One interval's dump of one target: its window and the files written for it.
struct Dump {
  Window window;
  std::vector<std::string> files; // names inside the target's directory
  uint64_t bytes = 0;             // their total size
  uint64_t folded_bytes = 0;      // the .folded file's, what a merge reads
};

// The names in the directory open as dir_fd, but "." and "..".
std::vector<std::string> names_in(int dir_fd);

// The dumps in a target directory, oldest first, from their file names (latest.*, temporaries,
// files not named after a window and anything but regular files are ignored).
std::vector<Dump> list_dumps(const std::string& directory);

// The same, in the directory open as dir_fd.
std::vector<Dump> list_dumps_at(int dir_fd);

// Parses a point in time: "2026-11-22T16:20:00Z", "2026-11-22 16:20:00" (UTC),
// "20261122T162000Z", "@1795000000" (seconds since the epoch), or "-30m", "-2h", "-1d" (before
// now). nullopt if it is none of those.
std::optional<Clock::time_point> parse_time(std::string_view text, Clock::time_point now);

// Parses a duration: "90s", "30m", "12h", "7d", or plain seconds. nullopt if malformed.
std::optional<std::chrono::seconds> parse_duration(std::string_view text);

// Parses a size: "500M", "2G", "64K", or plain bytes (powers of 1024). nullopt if malformed.
std::optional<uint64_t> parse_size(std::string_view text);

} // namespace flamebpf::dumps
