// Perf-map lines as a container writes them: any bytes. The parser and the range table must never
// crash; names must stay within their budget, visibly cut; and the table must stay a set of
// non-overlapping ranges where the latest line wins, within its budget of name bytes, whether it
// holds names or where their lines are (named once read).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "symbolize/name_cut.h"
#include "symbolize/perf_map.h"

using flamebpf::symbolize::kTruncated;
using flamebpf::symbolize::parse_perf_map_line;
using flamebpf::symbolize::PerfMapTable;

namespace {

// Small budgets, so that short inputs reach them.
constexpr size_t kNameBudget = 24;
constexpr size_t kTableBudget = 64;

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  std::string_view text(reinterpret_cast<const char*>(data), size);
  PerfMapTable table;
  PerfMapTable small(kTableBudget);
  PerfMapTable by_line;
  const char* begin = text.data();
  while (!text.empty()) {
    size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    auto offset = static_cast<uint64_t>(line.data() - begin);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    auto whole = parse_perf_map_line(line);
    auto entry = parse_perf_map_line(line, kNameBudget);
    if (whole.has_value() != entry.has_value())
      std::abort();
    if (!entry)
      continue;
    if (entry->end <= entry->start || entry->name.empty() || entry->name.size() > kNameBudget)
      std::abort();
    // A cut shows, and only a cut.
    if (entry->truncated != (whole->name.size() > kNameBudget) ||
        (entry->truncated && !entry->name.ends_with(kTruncated)))
      std::abort();
    uint64_t first = entry->start;
    uint64_t last = entry->end - 1;
    std::string name = entry->name;
    bool fitted = small.insert(*entry);
    by_line.insert_line(first, entry->end, offset, static_cast<uint32_t>(line.size()));
    table.insert(std::move(*entry));
    // The newest line owns its whole range; in the small table, under its name if it fitted.
    for (uint64_t address : {first, last, first + (last - first) / 2}) {
      auto found = table.find(address);
      if (!found || found->name != name)
        std::abort();
      auto held = small.find(address);
      if (!held || held->name != (fitted ? std::string_view(name) : kTruncated) ||
          (!fitted && !held->truncated))
        std::abort();
      // Where the newest line is, until its name is kept; then the name.
      auto located = by_line.find(address);
      if (!located ||
          (located->line && (*located->line != offset || located->line_bytes != line.size())))
        std::abort();
      if (!located->line && located->name != name)
        std::abort();
      if (located->line) {
        by_line.keep_name(located->start, name, false);
        auto kept = by_line.find(address);
        if (!kept || kept->line || kept->name != name)
          std::abort();
      }
    }
    if (small.name_bytes() > kTableBudget + kTruncated.size())
      std::abort();
  }
  return 0;
}
