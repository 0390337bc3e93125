// An ELF file's CFI turned into unwind rows: whatever the bytes, the table must end with a
// frame-pointer row, have strictly rising offsets within the code, hold only known kinds, and
// stay under the row cap; the same bytes must give the same content key.
// Input: one byte of flags (bit 0: .debug_frame's format, bit 1: the code's span is unknown,
// bit 2: the rest is a whole ELF image), then the CFI section's bytes (or the image).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/elf_reader.h"
#include "unwind/cfi_table.h"

using namespace flamebpf;
using namespace flamebpf::unwind;

namespace {

void check(const CfiTable& built, uint64_t span)
{
  const auto& rows = built.table.rows;
  if (rows.empty() || rows.size() > kMaxCfiRows || rows.back().kind != FB_UNWIND_FRAME_POINTER)
    std::abort();
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].kind > FB_UNWIND_STOP)
      std::abort();
    if (i > 0 && rows[i].pc_offset <= rows[i - 1].pc_offset)
      std::abort();
    if (span != 0 && rows[i].pc_offset > span)
      std::abort();
    if (rows[i].kind != FB_UNWIND_CFA_SP && rows[i].kind != FB_UNWIND_CFA_FP &&
        (rows[i].cfa_offset != 0 || rows[i].fp_offset_words != 0))
      std::abort();
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  if (size < 1)
    return 0;
  uint8_t flags = data[0];
  std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (flags & 4) {
    auto elf = ElfReader::open(ElfBytes::memory(bytes), "fuzzed");
    if (!elf)
      return 0;
    auto built = build_cfi_table(*elf);
    if (built)
      check(*built, 0);
    return 0;
  }
  CfiSection cfi;
  cfi.bytes = bytes;
  cfi.address = 0x2000;
  cfi.eh_frame = !(flags & 1);
  if (!(flags & 2)) {
    cfi.code_start = 0x1000;
    cfi.code_end = 0x1000 + (1 << 20);
  }
  auto built = build_cfi_table(cfi);
  if (!built)
    return 0;
  check(*built, flags & 2 ? 0 : 1 << 20);
  auto again = build_cfi_table(cfi);
  if (!again || again->content_key != built->content_key ||
      again->table.rows.size() != built->table.rows.size())
    std::abort();
  return 0;
}
