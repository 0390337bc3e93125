// Where the unwind stage puts the tables it loads: the sampler's BPF maps, behind an interface so
// that the bookkeeping can be tested against memory. Written only by the unwind stage.
#pragma once

#include <cstdint>
#include <span>

#include "bpf_abi.h"
#include "common/result.h"
#include "runtimes/cpython_abi.h"

namespace flamebpf::unwind {

class TableMaps {
public:
  virtual ~TableMaps() = default;

  // Rows the row array holds, and table slots the directory holds.
  virtual uint32_t row_capacity() const = 0;
  virtual uint32_t table_capacity() const = 0;
  // Writes rows from first_row on; first_row + rows.size() <= row_capacity().
  [[nodiscard]] virtual Result<> write_rows(uint32_t first_row,
                                            std::span<const fb_unwind_row> rows) = 0;
  // Points table slot `slot` at its rows (row_count 0 frees it).
  [[nodiscard]] virtual Result<> set_table(uint32_t slot, const fb_unwind_table& table) = 0;
  // Replaces the image's mappings with tables, whole.
  [[nodiscard]] virtual Result<> set_image(const fb_image_key& image,
                                           const fb_image_mappings& mappings) = 0;
  // The image goes back to the kernel's frame-pointer walker.
  virtual void remove_image(const fb_image_key& image) = 0;
  // The image's CPython frames are walked by walk; without one, no longer.
  [[nodiscard]] virtual Result<> set_cpython_walk(const fb_image_key& image,
                                                  const fb_cpython_process* walk)
  {
    (void)image, (void)walk;
    return {};
  }
};

} // namespace flamebpf::unwind
