#include "profile/source_name.h"

#include <charconv>

namespace flamebpf::profile {

std::string source_name(std::string_view function, std::string_view file, uint32_t line)
{
  std::string name;
  name.reserve(function.size() + file.size() + 16);
  name.append(function).append(" (").append(file).append(":").append(std::to_string(line));
  name.push_back(')');
  return name;
}

std::optional<SourcePlace> source_place(std::string_view name)
{
  if (!name.ends_with(')'))
    return std::nullopt;
  // The line is the digits after the last colon; a file's name may hold colons and " (" too, and
  // a function's rarely does, so the function ends at the first " (".
  size_t colon = name.rfind(':');
  size_t open = name.find(" (");
  if (colon == std::string_view::npos || open == std::string_view::npos || open == 0 ||
      open + 2 > colon)
    return std::nullopt;
  std::string_view digits = name.substr(colon + 1, name.size() - colon - 2);
  uint32_t line = 0;
  auto [end, failed] = std::from_chars(digits.data(), digits.data() + digits.size(), line);
  if (digits.empty() || failed != std::errc() || end != digits.data() + digits.size())
    return std::nullopt;
  return SourcePlace{name.substr(0, open), name.substr(open + 2, colon - open - 2), line};
}

} // namespace flamebpf::profile
