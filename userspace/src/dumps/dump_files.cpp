#include "dumps/dump_files.h"

#include <algorithm>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <map>
#include <sys/stat.h>

#include "common/atomic_file.h"
#include "common/text.h"
#include "common/unique_fd.h"
#include "profile/by_target.h"

namespace flamebpf::dumps {
namespace {

std::string stamp(Clock::time_point time, bool milliseconds)
{
  auto since = time.time_since_epoch();
  auto seconds = std::chrono::floor<std::chrono::seconds>(since);
  std::time_t whole = seconds.count();
  std::tm utc{};
  gmtime_r(&whole, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y%m%dT%H%M%S", &utc);
  if (!milliseconds)
    return std::string(text) + "Z";
  auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(since - seconds).count();
  return fmt::format("{}.{:03}Z", text, millis);
}

bool whole_second(Clock::time_point time)
{
  return time.time_since_epoch() % std::chrono::seconds(1) == Clock::duration::zero();
}

// The time point of a UTC calendar time.
std::optional<Clock::time_point>
utc_time(int year, int month, int day, int hour, int minute, int second, int millis = 0)
{
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour < 0 || hour > 23 || minute < 0 ||
      minute > 59 || second < 0 || second > 60 || millis < 0 || millis > 999)
    return std::nullopt;
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  std::time_t seconds = timegm(&tm);
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(
      std::chrono::seconds(seconds) + std::chrono::milliseconds(millis)));
}

// "20261122T162000Z" or "20261122T162000.250Z".
std::optional<Clock::time_point> parse_stamp(std::string_view text)
{
  if (text.size() < 16 || text[8] != 'T' || text.back() != 'Z')
    return std::nullopt;
  auto year = text::parse_number<int>(text.substr(0, 4));
  auto month = text::parse_number<int>(text.substr(4, 2));
  auto day = text::parse_number<int>(text.substr(6, 2));
  auto hour = text::parse_number<int>(text.substr(9, 2));
  auto minute = text::parse_number<int>(text.substr(11, 2));
  auto second = text::parse_number<int>(text.substr(13, 2));
  if (!year || !month || !day || !hour || !minute || !second)
    return std::nullopt;
  std::optional<int> millis = 0;
  std::string_view rest = text.substr(15, text.size() - 16);
  if (!rest.empty()) {
    if (rest.size() != 4 || rest[0] != '.')
      return std::nullopt;
    millis = text::parse_number<int>(rest.substr(1));
    if (!millis)
      return std::nullopt;
  }
  return utc_time(*year, *month, *day, *hour, *minute, *second, *millis);
}

} // namespace

std::string window_name(const Window& window)
{
  bool millis = !whole_second(window.start) || !whole_second(window.end);
  return stamp(window.start, millis) + "_" + stamp(window.end, millis);
}

std::optional<Window> parse_window_name(std::string_view file_name)
{
  size_t underscore = file_name.find('_');
  if (underscore == std::string_view::npos)
    return std::nullopt;
  size_t end = file_name.find('Z', underscore);
  if (end == std::string_view::npos)
    return std::nullopt;
  auto start = parse_stamp(file_name.substr(0, underscore));
  auto stop = parse_stamp(file_name.substr(underscore + 1, end - underscore));
  if (!start || !stop || *stop < *start)
    return std::nullopt;
  return Window{*start, *stop};
}

std::string target_directory(std::string_view target)
{
  return profile::target_file_name(target);
}

std::vector<std::string> names_in(int dir_fd)
{
  std::vector<std::string> names;
  // A descriptor of its own: readdir moves it, and closedir closes it.
  UniqueFd own(::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  DIR* dir = own.valid() ? ::fdopendir(own.get()) : nullptr;
  if (!dir)
    return names;
  own.release();
  while (dirent* entry = ::readdir(dir)) {
    std::string_view name = entry->d_name;
    if (name != "." && name != "..")
      names.emplace_back(name);
  }
  ::closedir(dir);
  return names;
}

std::vector<Dump> list_dumps(const std::string& directory)
{
  UniqueFd fd(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid())
    return {};
  return list_dumps_at(fd.get());
}

std::vector<Dump> list_dumps_at(int dir_fd)
{
  std::map<std::pair<Clock::time_point, Clock::time_point>, Dump> by_window;
  // A descriptor of its own: readdir moves it, and closedir closes it.
  UniqueFd own(::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  DIR* dir = own.valid() ? ::fdopendir(own.get()) : nullptr;
  if (!dir)
    return {};
  own.release();
  while (dirent* entry = ::readdir(dir)) {
    std::string name = entry->d_name;
    if (name.starts_with("latest.") || is_temporary_name(name))
      continue;
    auto window = parse_window_name(name);
    if (!window)
      continue;
    struct stat status {};
    if (::fstatat(dir_fd, name.c_str(), &status, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(status.st_mode))
      continue;
    Dump& dump = by_window[{window->start, window->end}];
    dump.window = *window;
    dump.files.push_back(name);
    dump.bytes += static_cast<uint64_t>(status.st_size);
    if (name.ends_with(".folded"))
      dump.folded_bytes = static_cast<uint64_t>(status.st_size);
  }
  ::closedir(dir);
  std::vector<Dump> dumps;
  for (auto& [key, dump] : by_window) {
    std::sort(dump.files.begin(), dump.files.end());
    dumps.push_back(std::move(dump));
  }
  return dumps;
}

namespace {

// Times and durations beyond this many seconds (about 130 years) are no one's: refused, so that
// no sum or conversion to the clock's nanoseconds overflows.
constexpr int64_t kMaxSeconds = int64_t{4102444800};

} // namespace

std::optional<std::chrono::seconds> parse_duration(std::string_view text)
{
  if (text.empty())
    return std::nullopt;
  int64_t unit = 1;
  switch (text.back()) {
  case 's':
    unit = 1;
    break;
  case 'm':
    unit = 60;
    break;
  case 'h':
    unit = 3600;
    break;
  case 'd':
    unit = 86400;
    break;
  default:
    unit = 0;
  }
  auto value = text::parse_number<int64_t>(unit == 0 ? text : text.substr(0, text.size() - 1));
  int64_t scale = unit == 0 ? 1 : unit;
  if (!value || *value < 0 || *value > kMaxSeconds / scale)
    return std::nullopt;
  return std::chrono::seconds(*value * scale);
}

std::optional<uint64_t> parse_size(std::string_view text)
{
  if (text.empty())
    return std::nullopt;
  uint64_t unit = 1;
  char last = static_cast<char>(std::toupper(static_cast<unsigned char>(text.back())));
  if (last == 'K' || last == 'M' || last == 'G' || last == 'T') {
    unit = last == 'K'   ? 1ull << 10
           : last == 'M' ? 1ull << 20
           : last == 'G' ? 1ull << 30
                         : 1ull << 40;
    text.remove_suffix(1);
  }
  auto value = text::parse_number<uint64_t>(text);
  if (!value)
    return std::nullopt;
  return *value * unit;
}

std::optional<Clock::time_point> parse_time(std::string_view text, Clock::time_point now)
{
  if (text.starts_with('-')) {
    auto ago = parse_duration(text.substr(1));
    if (!ago)
      return std::nullopt;
    return now - *ago;
  }
  if (text.starts_with('@')) {
    auto seconds = text::parse_number<int64_t>(text.substr(1));
    if (!seconds || *seconds < -kMaxSeconds || *seconds > kMaxSeconds)
      return std::nullopt;
    return Clock::time_point(std::chrono::seconds(*seconds));
  }
  if (auto compact = parse_stamp(text))
    return compact;
  // "2026-11-22T16:20:00Z" or "2026-11-22 16:20[:00]".
  if (text.size() < 16 || text[4] != '-' || text[7] != '-' ||
      (text[10] != 'T' && text[10] != ' ') || text[13] != ':')
    return std::nullopt;
  if (text.back() == 'Z')
    text.remove_suffix(1);
  auto year = text::parse_number<int>(text.substr(0, 4));
  auto month = text::parse_number<int>(text.substr(5, 2));
  auto day = text::parse_number<int>(text.substr(8, 2));
  auto hour = text::parse_number<int>(text.substr(11, 2));
  auto minute = text::parse_number<int>(text.substr(14, 2));
  std::optional<int> second = 0;
  if (text.size() > 16) {
    if (text[16] != ':' || text.size() != 19)
      return std::nullopt;
    second = text::parse_number<int>(text.substr(17, 2));
  }
  if (!year || !month || !day || !hour || !minute || !second)
    return std::nullopt;
  return utc_time(*year, *month, *day, *hour, *minute, *second);
}

} // namespace flamebpf::dumps
