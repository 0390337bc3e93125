#include "common/exported_objects.h"

#include <cstring>
#include <elf.h>
#include <string>

namespace flamebpf {

std::optional<uint64_t> load_bias(const ElfReader& elf, const procfs::Mapping& mapping)
{
  for (const auto& segment : elf.segments()) {
    if (segment.type == PT_LOAD && mapping.offset >= segment.offset &&
        mapping.offset < segment.offset + segment.file_size)
      return mapping.start - (segment.vaddr + (mapping.offset - segment.offset));
  }
  return std::nullopt;
}

Result<std::vector<std::optional<ExportedObject>>>
exported_objects(const ElfReader& elf, uint64_t bias, std::span<const std::string_view> names)
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
    if (s.type != STT_OBJECT || s.section == SHN_UNDEF || s.name >= text.size())
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
