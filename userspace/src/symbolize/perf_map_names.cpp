#include "symbolize/perf_map_names.h"

#include <optional>
#include <string>

#include "method_name.h"
#include "symbolize/name_cut.h"

namespace flamebpf::symbolize {

std::optional<std::string> java_method_name(std::string_view text, bool signatures)
{
  if (auto colons = text.find("::"); colons != std::string_view::npos) {
    // perf-map-agent: a class descriptor or dotted class, "::", the method, maybe a descriptor.
    std::string_view owner = text.substr(0, colons);
    std::string_view rest = text.substr(colons + 2);
    size_t paren = rest.find('(');
    std::string_view method = rest.substr(0, paren);
    if (owner.empty() || method.empty() || method.find(' ') != std::string_view::npos)
      return std::nullopt;
    std::string name = owner.starts_with('L') && owner.ends_with(';') ? agent::type_name(owner)
                                                                      : std::string(owner);
    name += '.';
    name += method;
    if (signatures && paren != std::string_view::npos)
      name += "(" + agent::parameter_list(rest.substr(paren)) + ")";
    return name;
  }
  size_t open = text.find('(');
  if (open == std::string_view::npos || !text.ends_with(')'))
    return std::nullopt;
  std::string_view qualified = text.substr(0, open);
  // The JDK puts the return type first: "long Foo.bar(long)".
  if (size_t space = qualified.rfind(' '); space != std::string_view::npos)
    qualified.remove_prefix(space + 1);
  size_t dot = qualified.rfind('.');
  if (qualified.empty() || dot == std::string_view::npos || dot == 0 || dot + 1 == qualified.size())
    return std::nullopt;
  std::string name(qualified);
  if (signatures)
    name += text.substr(open);
  return name;
}

std::vector<profile::Frame>
perf_map_frames(std::string_view name, bool java_signatures, uint64_t* dropped)
{
  std::vector<profile::Frame> frames;
  if (name == kTruncated) // a name the reader's budget replaced
    return {profile::Frame{std::string(kTruncated), "", profile::FrameKind::kUnknown}};
  std::string_view rest = name;
  for (;;) {
    size_t arrow = rest.find(agent::kInlineSeparator);
    std::string_view piece = rest.substr(0, arrow);
    bool last = arrow == std::string_view::npos;
    if (!frames.empty() && (frames.size() == kMaxInlineFrames || (last && piece == kTruncated))) {
      // Cut here, by the budget or by the reader; the methods after are counted, not read.
      if (dropped && piece != kTruncated) {
        uint64_t left = 1;
        for (size_t at = arrow; at != std::string_view::npos;
             at = rest.find(agent::kInlineSeparator, at + agent::kInlineSeparator.size()))
          ++left;
        *dropped += left;
      }
      frames.push_back({std::string(kTruncated), "", profile::FrameKind::kUnknown});
      return frames;
    }
    auto method = java_method_name(piece, java_signatures);
    if (!method) {
      // Not (all) Java: the name as the producer wrote it.
      return {profile::Frame{std::string(name), "", profile::FrameKind::kNative}};
    }
    frames.push_back({std::move(*method), "",
                      frames.empty() ? profile::FrameKind::kJit : profile::FrameKind::kInlined});
    if (last)
      return frames;
    rest.remove_prefix(arrow + agent::kInlineSeparator.size());
  }
}

runtimes::NamedCode perf_map_code(const PerfMapTable::Entry& entry, bool java_signatures)
{
  runtimes::NamedCode named;
  named.frames = perf_map_frames(entry.name, java_signatures, &named.dropped);
  named.cut_when_read = entry.truncated;
  return named;
}

} // namespace flamebpf::symbolize
