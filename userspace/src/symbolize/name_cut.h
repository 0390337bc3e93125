// Names read from a target (perf-map lines, symbols) have byte budgets, and where a budget cuts,
// the cut shows: a name cut short ends in "[truncated]", and frames left out of a stack are
// replaced by one frame of that name. The budgets are stated where they apply: perf_map.h (per
// name, per map and per process), perf_map_names.h (frames per name) and symbolizer.h (per frame
// name, per stack and per interval).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace flamebpf::symbolize {

// The mark of a cut: a frame's whole name, or the end of a name cut short.
inline constexpr std::string_view kTruncated = "[truncated]";

// name if it fits in max_bytes, else its longest start that leaves room for kTruncated, followed
// by kTruncated. The start ends on a UTF-8 character boundary; when separator occurs in it, it
// ends just after the last occurrence, so that a list of parts (an inline chain "A()->B()") loses
// whole parts and kTruncated becomes a part of its own. max_bytes must exceed kTruncated's size.
inline std::string
cut_name(std::string_view name, size_t max_bytes, std::string_view separator = {})
{
  if (name.size() <= max_bytes)
    return std::string(name);
  size_t keep = max_bytes - kTruncated.size();
  // Never inside a multi-byte character: continuation bytes are 10xxxxxx.
  while (keep > 0 && (static_cast<unsigned char>(name[keep]) & 0xc0) == 0x80)
    --keep;
  std::string_view kept = name.substr(0, keep);
  if (!separator.empty()) {
    if (size_t last = kept.rfind(separator); last != std::string_view::npos)
      kept = kept.substr(0, last + separator.size());
  }
  std::string cut;
  cut.reserve(kept.size() + kTruncated.size());
  cut.append(kept);
  cut.append(kTruncated);
  return cut;
}

} // namespace flamebpf::symbolize
