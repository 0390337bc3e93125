#include "jvm/frame_pointers.h"

#include <vector>

namespace flamebpf::jvm {
namespace {

// Updates setting from every word of text split at any of separators.
void scan(std::string_view text, std::string_view separators, std::optional<bool>& setting)
{
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find_first_of(separators, start);
    if (end == std::string_view::npos)
      end = text.size();
    std::string_view word = text.substr(start, end - start);
    if (word == "-XX:+PreserveFramePointer")
      setting = true;
    else if (word == "-XX:-PreserveFramePointer")
      setting = false;
    start = end + 1;
  }
}

std::string_view environment_value(std::string_view environ, std::string_view name)
{
  size_t start = 0;
  while (start < environ.size()) {
    size_t end = environ.find('\0', start);
    if (end == std::string_view::npos)
      end = environ.size();
    std::string_view entry = environ.substr(start, end - start);
    if (entry.size() > name.size() && entry.starts_with(name) && entry[name.size()] == '=')
      return entry.substr(name.size() + 1);
    start = end + 1;
  }
  return {};
}

} // namespace

std::optional<bool> frame_pointers_in_vm_flags(std::string_view vm_flags)
{
  std::optional<bool> setting;
  scan(vm_flags, " \n\t", setting);
  return setting;
}

std::optional<bool> frame_pointers_in_command_line(std::string_view cmdline,
                                                   std::string_view environ)
{
  std::optional<bool> setting;
  scan(environment_value(environ, "JAVA_TOOL_OPTIONS"), " \t\n", setting);
  scan(cmdline, std::string_view("\0", 1), setting);
  scan(environment_value(environ, "_JAVA_OPTIONS"), " \t\n", setting);
  return setting;
}

} // namespace flamebpf::jvm
