#include "unwind/go_table.h"

#include <algorithm>
#include <limits>

#include "runtimes/go_abi.h"
#include "unwind/arch.h"

namespace flamebpf::unwind {
namespace {

fb_unwind_row row_of(uint8_t kind, int16_t cfa_offset = 0, int8_t fp_offset_words = 0)
{
  fb_unwind_row row{};
  row.kind = kind;
  row.cfa_offset = cfa_offset;
  row.fp_offset_words = fp_offset_words;
  return row;
}

bool same(const fb_unwind_row& a, const fb_unwind_row& b)
{
  return a.kind == b.kind && a.cfa_offset == b.cfa_offset && a.fp_offset_words == b.fp_offset_words;
}

} // namespace

GoRows go_rows(go::Pclntab& table)
{
  GoRows out;
  std::vector<go::PcValueRun> runs;
  auto add = [&](uint64_t address, const fb_unwind_row& row) {
    if (!out.rows.empty() && same(out.rows.back().second, row))
      return;
    if (!out.rows.empty() && out.rows.back().first == address)
      out.rows.back().second = row;
    else
      out.rows.emplace_back(address, row);
  };
  for (size_t i = 0; i < table.size(); ++i) {
    go::GoFunction function = table.function(i);
    if (function.end <= function.entry)
      continue;
    ++out.functions;
    auto flags = table.flags(i);
    runs.clear();
    if (!flags || !table.stack_deltas(i, runs) || runs.empty() ||
        runs.front().begin != function.entry) {
      ++out.malformed;
      add(function.entry, row_of(FB_UNWIND_FRAME_POINTER));
      continue;
    }
    if (flags->top_frame) {
      add(function.entry, row_of(FB_UNWIND_STOP));
      continue;
    }
    if (flags->sp_write) {
      // Its table cannot say where its caller's frame is; the frame pointer it keeps is the
      // goroutine frame's it was called from, on another stack (go_abi.h).
      ++out.stack_switches;
      add(function.entry, row_of(FB_UNWIND_GO_STACK_SWITCH));
      continue;
    }
    uint64_t covered = function.entry;
    for (const auto& run : runs) {
      // The caller's sp is the entry's plus the return address; from the first push on, the
      // caller's frame pointer is saved right below the return address (Go's frame layout).
      int64_t cfa_offset = int64_t{run.value} + arch::kCfaAtEntry;
      if (run.value < 0 || cfa_offset > std::numeric_limits<int16_t>::max()) {
        ++out.large_frames;
        add(run.begin, row_of(FB_UNWIND_FRAME_POINTER));
      } else {
        add(run.begin, row_of(FB_UNWIND_CFA_SP, static_cast<int16_t>(cfa_offset),
                              run.value == 0 ? 0 : arch::kSavedFramePointerWords));
      }
      covered = run.end;
    }
    if (covered < function.end)
      add(covered, row_of(FB_UNWIND_FRAME_POINTER));
  }
  out.end = table.size() > 0 ? table.function(table.size() - 1).end : 0;
  return out;
}

std::optional<UnwindTable> merge_rows(const UnwindTable& cfi, const GoRows& go, size_t max_rows)
{
  if (go.rows.empty())
    return cfi;
  uint64_t go_begin = go.rows.front().first;
  uint64_t base = cfi.rows.empty() ? go_begin : std::min(cfi.base_address, go_begin);
  UnwindTable merged;
  merged.base_address = base;
  // Every address where either table's row changes, in order; at each, the CFI row in effect if
  // it describes the code, else Go's.
  size_t c = 0, g = 0;
  fb_unwind_row cfi_row = row_of(FB_UNWIND_FRAME_POINTER);
  fb_unwind_row go_row = row_of(FB_UNWIND_FRAME_POINTER);
  auto cfi_address = [&](size_t i) { return cfi.base_address + cfi.rows[i].pc_offset; };
  bool go_ended = false;
  while (c < cfi.rows.size() || g < go.rows.size() || !go_ended) {
    uint64_t next = std::numeric_limits<uint64_t>::max();
    if (c < cfi.rows.size())
      next = cfi_address(c);
    if (g < go.rows.size())
      next = std::min(next, go.rows[g].first);
    else if (!go_ended)
      next = std::min(next, go.end);
    while (c < cfi.rows.size() && cfi_address(c) == next)
      cfi_row = cfi.rows[c++];
    while (g < go.rows.size() && go.rows[g].first == next)
      go_row = go.rows[g++].second;
    if (g == go.rows.size() && !go_ended && next >= go.end) {
      go_row = row_of(FB_UNWIND_FRAME_POINTER);
      go_ended = true;
    }
    const fb_unwind_row& chosen = cfi_row.kind != FB_UNWIND_FRAME_POINTER ? cfi_row : go_row;
    if (next - base > std::numeric_limits<uint32_t>::max())
      return std::nullopt;
    if (!merged.rows.empty() && same(merged.rows.back(), chosen))
      continue;
    fb_unwind_row row = chosen;
    row.pc_offset = static_cast<uint32_t>(next - base);
    if (!merged.rows.empty() && merged.rows.back().pc_offset == row.pc_offset)
      merged.rows.back() = row;
    else
      merged.rows.push_back(row);
    if (merged.rows.size() > max_rows)
      return std::nullopt;
  }
  if (merged.rows.empty() || merged.rows.back().kind != FB_UNWIND_FRAME_POINTER)
    return std::nullopt; // cannot happen: both tables end with the frame pointer
  return merged;
}

} // namespace flamebpf::unwind
