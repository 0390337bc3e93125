// A CPython 3.11 code object's location table as a target's memory holds it: any bytes. The walk
// must never crash or read past the table, and must answer every instruction the same way however
// often it is asked.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "runtimes/cpython/cpython_lines.h"

using flamebpf::cpython::line_of_instruction;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  // The first line, then the table.
  if (size < 4)
    return 0;
  uint32_t first_line = 0;
  std::memcpy(&first_line, data, sizeof first_line);
  std::string_view table(reinterpret_cast<const char*>(data) + 4, size - 4);
  // Each entry covers at least one unit: no table of n bytes covers more than n * 8.
  for (uint32_t instruction = 0; instruction <= table.size() * 8 + 1 && instruction < 4096;
       ++instruction) {
    auto line = line_of_instruction(table, first_line, instruction);
    if (line != line_of_instruction(table, first_line, instruction))
      std::abort();
    if (instruction >= table.size() * 8 && line)
      std::abort(); // beyond what the table can cover
  }
  return 0;
}
