#include "unwind/cfi_table.h"

namespace flamebpf::unwind {

Result<CfiTable> build_cfi_table(const ElfReader&)
{
  // The parser follows; until then every address falls back to the frame pointer.
  CfiTable built;
  built.table.rows.push_back(fb_unwind_row{0, FB_UNWIND_FRAME_POINTER, 0, 0});
  return built;
}

} // namespace flamebpf::unwind
