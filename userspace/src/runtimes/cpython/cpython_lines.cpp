#include "runtimes/cpython/cpython_lines.h"

#include <algorithm>

namespace flamebpf::cpython {

namespace {

// The kinds of a location entry.
constexpr uint32_t kNoLocation = 15;
constexpr uint32_t kLongForm = 14;
constexpr uint32_t kNoColumns = 13;
constexpr uint32_t kFirstOneLineForm = 10;

// Reads the table's bytes in order; a read past the end fails the walk.
class Entries {
public:
  explicit Entries(std::string_view table) : table_(table) {}
  bool done() const { return at_ >= table_.size(); }
  std::optional<uint8_t> byte()
  {
    if (at_ >= table_.size())
      return std::nullopt;
    return static_cast<uint8_t>(table_[at_++]);
  }
  // 6 bits a byte, the next byte following while bit 6 is set; at most 32 bits' worth.
  std::optional<uint32_t> varint()
  {
    uint32_t value = 0;
    for (uint32_t shift = 0; shift < 32; shift += 6) {
      auto next = byte();
      if (!next)
        return std::nullopt;
      value |= static_cast<uint32_t>(*next & 63) << shift;
      if (!(*next & 64))
        return value;
    }
    return std::nullopt;
  }
  std::optional<int64_t> signed_varint()
  {
    auto value = varint();
    if (!value)
      return std::nullopt;
    return (*value & 1) ? -static_cast<int64_t>(*value >> 1) : static_cast<int64_t>(*value >> 1);
  }
  bool skip(size_t bytes)
  {
    if (table_.size() - at_ < bytes)
      return false;
    at_ += bytes;
    return true;
  }

private:
  std::string_view table_;
  size_t at_ = 0;
};

} // namespace

std::vector<LineSpan> line_spans(std::string_view table, uint32_t first_line)
{
  std::vector<LineSpan> spans;
  Entries entries(table);
  int64_t line = first_line;
  uint64_t unit = 0; // the first code unit of the entry
  while (!entries.done()) {
    auto start = entries.byte();
    if (!start || !(*start & 0x80))
      break; // an entry starts with the top bit set
    uint32_t kind = (*start >> 3) & 15;
    uint64_t units = (*start & 7) + 1;
    bool located = true;
    if (kind == kNoLocation) {
      located = false;
    } else if (kind == kLongForm) {
      auto delta = entries.signed_varint();
      // The end line's delta, the column and the end column.
      if (!delta || !entries.varint() || !entries.varint() || !entries.varint())
        break;
      line += *delta;
    } else if (kind == kNoColumns) {
      auto delta = entries.signed_varint();
      if (!delta)
        break;
      line += *delta;
    } else if (kind >= kFirstOneLineForm) {
      line += kind - kFirstOneLineForm;
      if (!entries.skip(2)) // the column and the end column
        break;
    } else if (!entries.skip(1)) { // a short form: the line stays, one byte of columns
      break;
    }
    // A line out of range ends the table.
    if (line < 0 || line >= kNoLine)
      break;
    unit += units;
    if (unit > UINT32_MAX)
      break;
    auto span =
        LineSpan{static_cast<uint32_t>(unit), located ? static_cast<uint32_t>(line) : kNoLine};
    if (!spans.empty() && spans.back().line == span.line)
      spans.back().end = span.end;
    else
      spans.push_back(span);
  }
  return spans;
}

std::optional<uint32_t> line_in_spans(const std::vector<LineSpan>& spans, uint32_t instruction)
{
  auto span = std::upper_bound(spans.begin(), spans.end(), instruction,
                               [](uint32_t unit, const LineSpan& s) { return unit < s.end; });
  if (span == spans.end() || span->line == kNoLine)
    return std::nullopt;
  return span->line;
}

std::optional<uint32_t>
line_of_instruction(std::string_view table, uint32_t first_line, uint32_t instruction)
{
  return line_in_spans(line_spans(table, first_line), instruction);
}

} // namespace flamebpf::cpython
