// Unwind records as a JVM's /tmp may hold them: any bytes. The parser, the records' state and the
// table built from them must never crash; the table must stay sorted, bounded, and end in a
// frame-pointer row, and every row's CFA offset must be one a real frame has; each method's line
// is the last one applied for it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string_view>

#include "runtimes/hotspot/jit_table.h"
#include "runtimes/hotspot/jvm_records.h"

using namespace flamebpf::hotspot;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  std::string_view text(reinterpret_cast<const char*>(data), size);
  JvmRecords records;
  std::map<uint64_t, uint64_t> method_lines;
  while (!text.empty()) {
    size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    uint64_t offset = size - text.size();
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    auto record = parse_jvm_record_line(line);
    if (!record)
      continue;
    record->line_offset = offset;
    if (record->kind == JvmRecord::Kind::kMethod)
      method_lines[record->method] = offset;
    if (record->kind == JvmRecord::Kind::kCode &&
        (record->code.size == 0 || record->code.start + record->code.size < record->code.start))
      std::abort();
    records.apply(*record);
  }
  for (const auto& [method, offset] : method_lines) {
    if (records.method_line(method) != offset)
      std::abort();
  }
  // Code ranges never overlap.
  uint64_t previous_end = 0;
  for (const auto& [start, code] : records.code()) {
    if (start < previous_end)
      std::abort();
    previous_end = start + code.size;
  }
  std::vector<CodeRange> everywhere{{0, UINT64_MAX}};
  JitTableDrops drops;
  auto table = build_jit_table(records, everywhere, &drops);
  if (!table)
    return 0;
  const auto& rows = table->rows;
  if (rows.empty() || rows.size() > kMaxJitRows + 1 || rows.back().kind != FB_UNWIND_FRAME_POINTER)
    std::abort();
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i > 0 && rows[i].pc_offset <= rows[i - 1].pc_offset)
      std::abort();
    if (rows[i].kind == FB_UNWIND_CFA_SP &&
        (rows[i].cfa_offset < 8 || rows[i].cfa_offset > int{kMaxJitFrameWords} * 8))
      std::abort();
  }
  return 0;
}
