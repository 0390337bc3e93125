// Perf-map lines as a container writes them: any bytes. The parser and the range table must never
// crash, and the table must stay a set of non-overlapping ranges where the latest line wins.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "symbolize/perf_map.h"

using flamebpf::symbolize::parse_perf_map_line;
using flamebpf::symbolize::PerfMapTable;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  std::string_view text(reinterpret_cast<const char*>(data), size);
  PerfMapTable table;
  while (!text.empty()) {
    size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    auto entry = parse_perf_map_line(line);
    if (!entry)
      continue;
    if (entry->end <= entry->start || entry->name.empty())
      std::abort();
    uint64_t first = entry->start;
    uint64_t last = entry->end - 1;
    std::string name = entry->name;
    table.insert(std::move(*entry));
    // The newest line owns its whole range.
    for (uint64_t address : {first, last, first + (last - first) / 2}) {
      const auto* found = table.find(address);
      if (found == nullptr || found->name != name)
        std::abort();
    }
  }
  return 0;
}
