// Where a mapped ELF file is loaded in the process that maps it, and the data it exports by name
// (the objects of its .dynsym) at their addresses there: what a runtime's structures are read
// from outside through begins at such a symbol (HotSpot's gHotSpotVMStructs, CPython's
// _PyRuntime).
#pragma once

#include <cstdint>
#include <elf.h>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "common/elf_reader.h"
#include "common/proc_maps.h"
#include "common/result.h"

namespace flamebpf {

// What the dynamic symbols and their names take at most: a large library's are a few MiB.
inline constexpr size_t kMaxDynamicSymbolBytes = 8 << 20;

struct ExportedObject {
  uint64_t file_vaddr = 0; // the symbol's value: its virtual address in the file
  uint64_t address = 0;    // where the process has it: file_vaddr plus the load bias
  uint64_t size = 0;
};

// Where a file's load segment lies, to find each mapping's load bias.
struct LoadSegment {
  uint64_t offset = 0; // in the file
  uint64_t vaddr = 0;
  uint64_t file_size = 0;
  bool executable = true; // PF_X
};

// elf's PT_LOAD segments.
std::vector<LoadSegment> load_segments(const ElfReader& elf);

// The address that the file's virtual address 0 lands at in mapping, one of the mappings of the
// file whose load segments are segments: start minus the virtual address of the mapped offset.
// nullopt if no load segment holds that offset.
std::optional<uint64_t> load_bias(std::span<const LoadSegment> segments,
                                  const procfs::Mapping& mapping);
// The same for elf's segments.
std::optional<uint64_t> load_bias(const ElfReader& elf, const procfs::Mapping& mapping);

// The objects named names that elf's .dynsym exports, in the order of names, with the load bias
// bias added; nullopt where one is not exported. Fails if the file has no dynamic symbols or they
// cannot be read.
[[nodiscard]] Result<std::vector<std::optional<ExportedObject>>>
exported_objects(const ElfReader& elf,
                 uint64_t bias,
                 std::span<const std::string_view> names,
                 uint8_t type = STT_OBJECT);

} // namespace flamebpf
