// An ELF file's DWARF turned into an inline index: whatever the bytes, the build must end (with an
// index or an error), hold no more than its budget, and every lookup give at most kMaxInlineDepth
// names, none empty.
// Input: one byte of flags, then either (bit 0 set) a whole ELF image, or the contents of
// .debug_info, .debug_abbrev, .debug_str, .debug_str_offsets, .debug_addr, .debug_ranges and
// .debug_rnglists, in that order, separated by kSeparator, put into a small ELF image whose
// executable section spans 0x1000 to 0x2000; bit 1 marks .debug_info SHF_COMPRESSED (its
// content then starts with an Elf64_Chdr).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <elf.h>
#include <string>
#include <string_view>
#include <vector>

#include "common/elf_reader.h"
#include "symbolize/dwarf_inlines.h"
#include "symbolize/synthetic_elf.h"

using namespace flamebpf;
using namespace flamebpf::symbolize;

namespace {

constexpr std::string_view kSeparator = "\xfe\xed\xfa\xce";
constexpr const char* kSectionNames[] = {".debug_info",        ".debug_abbrev", ".debug_str",
                                         ".debug_str_offsets", ".debug_addr",   ".debug_ranges",
                                         ".debug_rnglists"};

// A small ELF image holding parts as the sections above, beside its code.
std::string image_of(const std::vector<std::string_view>& parts, bool compressed_info)
{
  testing::SyntheticElf elf;
  for (size_t i = 0; i < parts.size(); ++i)
    elf.sections.emplace_back(kSectionNames[i], std::string(parts[i]));
  if (compressed_info)
    elf.section_flags[kSectionNames[0]] = SHF_COMPRESSED;
  return elf.bytes();
}

void check(const ElfReader& reader)
{
  std::vector<std::string> problems;
  auto index = InlineIndex::build(reader, 0, problems);
  if (!index)
    return;
  if ((*index)->memory_bytes() > kMaxInlineIndexBytes + (1 << 20))
    std::abort();
  for (uint64_t address = 0x1000; address < 0x1300; ++address) {
    auto chain = (*index)->at(address);
    if (chain.size() > kMaxInlineDepth)
      std::abort();
    for (const auto& inlined : chain) {
      if (inlined.name.empty() || inlined.name.size() > kMaxInlineNameBytes)
        std::abort();
    }
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  if (size < 1)
    return 0;
  uint8_t flags = data[0];
  std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (flags & 1) {
    auto elf = ElfReader::open(ElfBytes::memory(bytes), "fuzzed");
    if (elf)
      check(*elf);
    return 0;
  }
  std::vector<std::string_view> parts;
  while (parts.size() + 1 < std::size(kSectionNames)) {
    size_t end = bytes.find(kSeparator);
    if (end == std::string_view::npos)
      break;
    parts.push_back(bytes.substr(0, end));
    bytes.remove_prefix(end + kSeparator.size());
  }
  parts.push_back(bytes);
  std::string image = image_of(parts, flags & 2);
  auto elf = ElfReader::open(ElfBytes::memory(image), "fuzzed");
  if (elf)
    check(*elf);
  return 0;
}
