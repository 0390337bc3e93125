#include "runtimes/hotspot/jvm_flags.h"

#include <algorithm>
#include <span>

#include "common/text.h"

namespace flamebpf::hotspot {
namespace {

// A boolean setting as the JVM's words spell it.
struct FlagWords {
  std::span<const std::string_view> on;
  std::span<const std::string_view> off;
};

constexpr std::string_view kFramePointersOn[] = {"-XX:+PreserveFramePointer"};
constexpr std::string_view kFramePointersOff[] = {"-XX:-PreserveFramePointer"};
constexpr FlagWords kFramePointers{kFramePointersOn, kFramePointersOff};

constexpr std::string_view kReducedSignalsOn[] = {"-Xrs", "-XX:+ReduceSignalUsage"};
constexpr std::string_view kReducedSignalsOff[] = {"-XX:-ReduceSignalUsage"};
constexpr FlagWords kReducedSignals{kReducedSignalsOn, kReducedSignalsOff};

// Updates setting from every word of text split at any of separators.
void scan(std::string_view text,
          std::string_view separators,
          const FlagWords& flag,
          std::optional<bool>& setting)
{
  auto is_one_of = [](std::string_view word, std::span<const std::string_view> words) {
    return std::find(words.begin(), words.end(), word) != words.end();
  };
  for (std::string_view word : text::split_fields(text, separators)) {
    if (is_one_of(word, flag.on))
      setting = true;
    else if (is_one_of(word, flag.off))
      setting = false;
  }
}

std::string_view environment_value(std::string_view environ, std::string_view name)
{
  for (std::string_view entry : text::lines(environ, '\0')) {
    if (entry.size() > name.size() && entry.starts_with(name) && entry[name.size()] == '=')
      return entry.substr(name.size() + 1);
  }
  return {};
}

std::optional<bool>
flag_in_command_line(std::string_view cmdline, std::string_view environ, const FlagWords& flag)
{
  std::optional<bool> setting;
  scan(environment_value(environ, "JAVA_TOOL_OPTIONS"), " \t\n", flag, setting);
  scan(cmdline, std::string_view("\0", 1), flag, setting);
  scan(environment_value(environ, "_JAVA_OPTIONS"), " \t\n", flag, setting);
  return setting;
}

} // namespace

std::optional<bool> frame_pointers_in_vm_flags(std::string_view vm_flags)
{
  std::optional<bool> setting;
  scan(vm_flags, " \n\t", kFramePointers, setting);
  return setting;
}

std::optional<bool> frame_pointers_in_command_line(std::string_view cmdline,
                                                   std::string_view environ)
{
  return flag_in_command_line(cmdline, environ, kFramePointers);
}

bool reduced_signals_in_command_line(std::string_view cmdline, std::string_view environ)
{
  return flag_in_command_line(cmdline, environ, kReducedSignals).value_or(false);
}

} // namespace flamebpf::hotspot
