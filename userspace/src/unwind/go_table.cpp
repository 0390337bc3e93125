#include "unwind/go_table.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

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

// Code bytes read from the file through one moving window: functions come in address order.
class CodeWindow {
public:
  explicit CodeWindow(const ElfReader& elf) : elf_(&elf) {}

  // length bytes from address, fewer where its segment's file bytes end; empty if none.
  std::string_view at(uint64_t address, size_t length)
  {
    if (address >= window_at_ && address - window_at_ < window_.size())
      return std::string_view(window_).substr(address - window_at_, length);
    window_.clear();
    auto place = elf_->file_offset_of(address);
    if (!place)
      return {};
    size_t wanted = static_cast<size_t>(std::min<uint64_t>(kWindowBytes, place->second));
    if (!elf_->bytes().read(place->first, wanted, window_)) {
      window_.clear();
      return {};
    }
    window_at_ = address;
    return std::string_view(window_).substr(0, length);
  }

private:
  static constexpr size_t kWindowBytes = 64 << 10;
  const ElfReader* elf_;
  std::string window_;
  uint64_t window_at_ = 0;
};

// The length of `op rbp, displacement(rsp)` (x86-64: REX.W, op, ModRM with rbp as the register
// and an SIB byte naming rsp alone) at the start of code; 0 if code starts otherwise.
size_t rbp_and_rsp_slot(std::string_view code, uint8_t op, int64_t displacement)
{
  auto byte = [&](size_t i) { return static_cast<uint8_t>(code[i]); };
  if (code.size() < 4 || byte(0) != 0x48 || byte(1) != op || (byte(2) & 0x3f) != 0x2c ||
      byte(3) != 0x24)
    return 0;
  switch (byte(2) >> 6) {
  case 0:
    return displacement == 0 ? 4 : 0;
  case 1:
    return code.size() >= 5 && static_cast<int8_t>(byte(4)) == displacement ? 5 : 0;
  case 2: {
    int32_t wide = 0;
    if (code.size() < 8)
      return 0;
    std::memcpy(&wide, code.data() + 4, sizeof wide);
    return wide == displacement ? 8 : 0;
  }
  default:
    return 0;
  }
}

// Where rbp starts to hold the frame of a function whose stack-pointer delta first becomes delta
// at address, if the code there is Go's framing (cmd/internal/obj/x86/obj6.go): Go 1.21 and later
// `push rbp; mov rbp, rsp` (the delta is the push's 8), earlier `sub rsp, delta;
// mov [rsp + delta - 8], rbp; lea rbp, [rsp + delta - 8]`. nullopt otherwise.
std::optional<uint64_t> frame_pointer_set(CodeWindow& code, uint64_t address, int32_t delta)
{
  constexpr uint8_t kPushRbp = 0x55;
  constexpr std::string_view kMovRbpRsp("\x48\x89\xe5", 3);
  constexpr uint8_t kStore = 0x89, kLoadAddress = 0x8d;
  if (delta == 8) {
    std::string_view before = code.at(address - 1, 4);
    if (before.size() == 4 && static_cast<uint8_t>(before[0]) == kPushRbp &&
        before.substr(1) == kMovRbpRsp)
      return address + kMovRbpRsp.size();
  }
  std::string_view after = code.at(address, 16);
  size_t store = rbp_and_rsp_slot(after, kStore, int64_t{delta} - 8);
  if (store == 0)
    return std::nullopt;
  size_t load = rbp_and_rsp_slot(after.substr(store), kLoadAddress, int64_t{delta} - 8);
  if (load == 0)
    return std::nullopt;
  return address + store + load;
}

} // namespace

GoRows go_rows(go::Pclntab& table, const ElfReader& elf)
{
  GoRows out;
  std::vector<go::PcValueRun> runs;
  CodeWindow code(elf);
  // The framing recognized is x86-64's.
  bool x86_64 = elf.machine() == EM_X86_64;
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
    runs.clear();
    auto flags = table.frame(i, runs);
    if (!flags || runs.empty() || runs.front().begin != function.entry) {
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
    // A framed function (Go's framing at its first stack adjustment): its entry's run as it is,
    // the frame pointer from that adjustment (push rbp, or sub rsp before Go 1.21) on, and the
    // runs of its stack-growth tail (after its last frame, with the entry's delta of 0) as they
    // are. The one or two instructions from the adjustment until rbp points at the frame are the
    // frame pointer's too: a row for them would cost one per function (go_table.h).
    auto first_frame = std::find_if(runs.begin(), runs.end(),
                                    [](const go::PcValueRun& run) { return run.value != 0; });
    uint64_t tail = runs.back().end;
    for (auto run = runs.rbegin(); run != runs.rend() && run->value == 0; ++run)
      tail = run->begin;
    bool framed = false;
    if (x86_64 && first_frame != runs.end() && first_frame->value > 0) {
      auto frame_set = frame_pointer_set(code, first_frame->begin, first_frame->value);
      framed = frame_set && *frame_set <= first_frame->end && *frame_set <= tail;
    }
    out.framed += framed;
    for (const auto& run : runs) {
      if (framed && run.begin >= first_frame->begin && run.begin < tail)
        continue;
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
      if (framed && run.end == first_frame->begin)
        add(run.end, row_of(FB_UNWIND_FRAME_POINTER));
    }
    // The padding after the function's code never runs: it keeps the last row, so that the
    // next function's entry may share it.
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
