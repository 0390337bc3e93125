#include "common/exported_objects.h"

#include <cstring>
#include <elf.h>
#include <string>
#include <unistd.h>

namespace flamebpf {

std::vector<LoadSegment> load_segments(const ElfReader& elf)
{
  std::vector<LoadSegment> segments;
  for (const auto& segment : elf.segments())
    if (segment.type == PT_LOAD)
      segments.push_back(
          {segment.offset, segment.vaddr, segment.file_size, (segment.flags & PF_X) != 0});
  return segments;
}

std::optional<uint64_t> load_bias(std::span<const LoadSegment> segments,
                                  const procfs::Mapping& mapping)
{
  // The segment this mapping was made for: the loader maps each from the page that holds its
  // first byte, with the segment's permissions. Linkers that pack segments without page alignment
  // in the file (lld, mold) put the end of one and the start of the next in the same page, so the
  // mapping's offset also lies inside the segment before, whose bias would be off by the pages
  // between; in a small file two segments may even start in one page, told apart by whether they
  // are code.
  static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  for (const auto& segment : segments) {
    if ((segment.offset & ~(page - 1)) == mapping.offset && segment.file_size > 0 &&
        segment.executable == mapping.executable)
      return mapping.start - (segment.vaddr & ~(page - 1));
  }
  // A mapping that starts inside its segment (one split by mprotect, or partly unmapped).
  for (const auto& segment : segments) {
    if (mapping.offset >= segment.offset && mapping.offset - segment.offset < segment.file_size)
      return mapping.start - (segment.vaddr + (mapping.offset - segment.offset));
  }
  return std::nullopt;
}

std::optional<uint64_t> load_bias(const ElfReader& elf, const procfs::Mapping& mapping)
{
  return load_bias(load_segments(elf), mapping);
}

Result<std::vector<std::optional<ExportedObject>>> exported_objects(
    const ElfReader& elf, uint64_t bias, std::span<const std::string_view> names, uint8_t type)
{
  const ElfSection* dynsym = elf.section_of_type(SHT_DYNSYM);
  if (!dynsym || dynsym->link >= elf.sections().size())
    return fail(error(elf.shown() + ": no dynamic symbols"));
  auto strings = elf.read_section(elf.sections()[dynsym->link], kMaxDynamicSymbolBytes);
  if (!strings)
    return fail(strings.error());
  const std::string& text = strings->bytes;
  std::vector<std::optional<ExportedObject>> found(names.size());
  auto visited = elf.read_symbols(*dynsym, kMaxDynamicSymbolBytes, [&](const ElfSymbolEntry& s) {
    if (s.type != type || s.section == SHN_UNDEF || s.name >= text.size())
      return;
    std::string_view name(text.data() + s.name,
                          strnlen(text.data() + s.name, text.size() - s.name));
    for (size_t i = 0; i < names.size(); ++i) {
      if (name == names[i])
        found[i] = ExportedObject{s.value, bias + s.value, s.size};
    }
  });
  if (!visited)
    return fail(visited.error());
  return found;
}

} // namespace flamebpf
