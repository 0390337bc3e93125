#include "runtimes/hotspot/jit_table.h"

#include <algorithm>
#include <optional>

#include "unwind/arch.h"

namespace flamebpf::hotspot {

namespace arch = unwind::arch;
namespace {

// Rows in address order, each holding up to the next; gaps are frame-pointer rows.
class RowWriter {
public:
  explicit RowWriter(uint64_t base) : base_(base) {}

  // The rule [from, to) with kind and offsets; to ends it with a frame-pointer row unless the
  // next rule starts there.
  void add(uint64_t from, uint64_t to, uint8_t kind, int16_t cfa_offset, int8_t fp_words)
  {
    if (from >= to)
      return;
    if (open_end_ && *open_end_ != from)
      push(*open_end_, FB_UNWIND_FRAME_POINTER, 0, 0);
    push(from, kind, cfa_offset, fp_words);
    open_end_ = to;
  }
  size_t size() const { return rows_.size(); }
  std::vector<fb_unwind_row> finish()
  {
    if (open_end_)
      push(*open_end_, FB_UNWIND_FRAME_POINTER, 0, 0);
    else if (rows_.empty())
      push(base_, FB_UNWIND_FRAME_POINTER, 0, 0);
    return std::move(rows_);
  }

private:
  void push(uint64_t at, uint8_t kind, int16_t cfa_offset, int8_t fp_words)
  {
    fb_unwind_row row{};
    row.pc_offset = static_cast<uint32_t>(at - base_);
    row.kind = kind;
    row.fp_offset_words = fp_words;
    row.cfa_offset = cfa_offset;
    if (!rows_.empty() && rows_.back().kind == kind && rows_.back().cfa_offset == cfa_offset &&
        rows_.back().fp_offset_words == fp_words)
      return; // the same rule continues
    if (!rows_.empty() && rows_.back().pc_offset == row.pc_offset)
      rows_.back() = row; // an empty stretch: the later rule holds from here
    else
      rows_.push_back(row);
  }

  uint64_t base_;
  std::vector<fb_unwind_row> rows_;
  std::optional<uint64_t> open_end_;
};

bool inside(const std::vector<CodeRange>& ranges, uint64_t start, uint64_t end)
{
  auto it = std::upper_bound(
      ranges.begin(), ranges.end(), start,
      [](uint64_t address, const CodeRange& range) { return address < range.start; });
  if (it == ranges.begin())
    return false;
  --it;
  return start >= it->start && end <= it->end;
}

// The rows of one piece of code with a frame.
void add_code(RowWriter& rows, const JvmCode& code)
{
  uint64_t start = code.start;
  uint64_t end = code.start + code.size;
  auto frame = static_cast<int16_t>(code.frame_words * arch::kWordBytes);
  constexpr int8_t kSavedRbp = arch::kSavedFramePointerWords;
  switch (code.prologue) {
  case PrologueForm::kPush:
    rows.add(start, start + code.first_end, FB_UNWIND_CFA_SP, arch::kCfaAtEntry, 0);
    rows.add(start + code.first_end, start + code.second_end, FB_UNWIND_CFA_SP,
             arch::kCfaAfterFramePointerPush, kSavedRbp);
    rows.add(start + code.second_end, end, FB_UNWIND_HOTSPOT_COMPILED, frame, kSavedRbp);
    return;
  case PrologueForm::kSave:
    rows.add(start, start + code.first_end, FB_UNWIND_CFA_SP, arch::kCfaAtEntry, 0);
    rows.add(start + code.first_end, start + code.second_end, FB_UNWIND_CFA_SP, frame, 0);
    rows.add(start + code.second_end, end, FB_UNWIND_HOTSPOT_COMPILED, frame, kSavedRbp);
    return;
  case PrologueForm::kUnknown:
    // Only where the blob says its frame is complete; before that, frame pointers.
    if (code.frame_complete >= 0)
      rows.add(start + static_cast<uint64_t>(code.frame_complete), end, FB_UNWIND_HOTSPOT_COMPILED,
               frame, kSavedRbp);
    return;
  }
}

} // namespace

std::optional<UnwindTable> build_jit_table(const JvmRecords& records,
                                           const std::vector<CodeRange>& code_cache,
                                           JitTableDrops* drops)
{
  JitTableDrops dropped;
  std::vector<const JvmCode*> kept;
  auto interpreter = records.interpreter();
  if (interpreter && !inside(code_cache, interpreter->first, interpreter->second)) {
    ++dropped.outside_code_cache;
    interpreter.reset();
  }
  for (const auto& [start, code] : records.code()) {
    uint64_t end = start + code.size;
    if (code.frame_words == 0)
      continue; // frame pointers, as for code without records
    if (code.frame_words > kMaxJitFrameWords) {
      ++dropped.frame_too_large;
      continue;
    }
    if (!inside(code_cache, start, end)) {
      ++dropped.outside_code_cache;
      continue;
    }
    // The interpreter's own range is described as such.
    if (interpreter && start < interpreter->second && end > interpreter->first)
      continue;
    kept.push_back(&code);
  }
  uint64_t base = kept.empty() ? UINT64_MAX : kept.front()->start;
  if (interpreter)
    base = std::min(base, interpreter->first);
  if (base == UINT64_MAX) {
    if (drops)
      *drops = dropped;
    return std::nullopt;
  }
  // Offsets are 32 bits: a code cache spans at most 2 GiB, so code beyond 4 GiB of the lowest is
  // no JVM's.
  constexpr uint64_t kMaxSpan = uint64_t{1} << 32;
  RowWriter rows(base);
  bool interpreter_added = false;
  auto add_interpreter = [&] {
    interpreter_added = true;
    if (interpreter->second - base >= kMaxSpan) {
      ++dropped.outside_code_cache;
      return;
    }
    rows.add(interpreter->first, interpreter->second, FB_UNWIND_HOTSPOT_INTERPRETER, 0, 0);
  };
  for (const JvmCode* code : kept) {
    if (interpreter && !interpreter_added && interpreter->first < code->start)
      add_interpreter();
    if (code->start + code->size - base >= kMaxSpan) {
      ++dropped.outside_code_cache;
      continue;
    }
    if (rows.size() + 4 > kMaxJitRows) {
      ++dropped.over_budget;
      continue;
    }
    add_code(rows, *code);
  }
  if (interpreter && !interpreter_added)
    add_interpreter();
  if (drops)
    *drops = dropped;
  UnwindTable table;
  table.base_address = base;
  table.rows = rows.finish();
  return table;
}

std::optional<UnwindTable> JitTableKeeper::rebuild(const JvmRecords& records,
                                                   const std::vector<CodeRange>& code_cache,
                                                   JitTableDrops* drops)
{
  if (built_generation_ == records.generation())
    return std::nullopt;
  built_generation_ = records.generation();
  return build_jit_table(records, code_cache, drops);
}

} // namespace flamebpf::hotspot
