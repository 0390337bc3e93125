#include "common/text.h"

namespace flamebpf::text {

std::vector<std::string_view> split_fields(std::string_view line, std::string_view separators)
{
  std::vector<std::string_view> fields;
  size_t start = line.find_first_not_of(separators);
  while (start != std::string_view::npos) {
    size_t end = line.find_first_of(separators, start);
    fields.push_back(line.substr(start, end == std::string_view::npos ? end : end - start));
    start = end == std::string_view::npos ? end : line.find_first_not_of(separators, end);
  }
  return fields;
}

std::string_view take_line(std::string_view& text, char terminator)
{
  size_t end = text.find(terminator);
  std::string_view line = text.substr(0, end);
  text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
  return line;
}

} // namespace flamebpf::text
