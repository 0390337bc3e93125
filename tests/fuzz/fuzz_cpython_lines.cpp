// A CPython code object's location table as a target's memory holds it: any bytes. The decoding
// must never crash or read past the table, its spans must be in order and within what the table
// can cover, and a unit must be answered alike from the spans and from the table.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "runtimes/cpython/cpython_lines.h"

using flamebpf::cpython::line_in_spans;
using flamebpf::cpython::line_of_instruction;
using flamebpf::cpython::line_spans;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  // The first line, then the table.
  if (size < 4)
    return 0;
  uint32_t first_line = 0;
  std::memcpy(&first_line, data, sizeof first_line);
  std::string_view table(reinterpret_cast<const char*>(data) + 4, size - 4);
  // The spans, decoded once: in order, each with units, neighbours of other lines. Each entry
  // covers at most 8 units: no table of n bytes covers more than n * 8.
  auto spans = line_spans(table, first_line);
  for (size_t i = 0; i < spans.size(); ++i) {
    uint32_t start = i == 0 ? 0 : spans[i - 1].end;
    if (spans[i].end <= start || (i > 0 && spans[i].line == spans[i - 1].line))
      std::abort();
  }
  if (!spans.empty() && spans.back().end > table.size() * 8)
    std::abort();
  for (uint32_t instruction = 0; instruction <= table.size() * 8 + 1 && instruction < 4096;
       ++instruction) {
    auto line = line_in_spans(spans, instruction);
    if (instruction >= table.size() * 8 && line)
      std::abort(); // beyond what the table can cover
    // The one-call form answers as the spans do (checked on a few units: it decodes the table).
    if (instruction % 61 == 0 && line != line_of_instruction(table, first_line, instruction))
      std::abort();
  }
  return 0;
}
