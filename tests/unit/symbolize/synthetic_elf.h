// Small ELF images written byte by byte, for what no linker makes: hostile counts and sizes,
// names of any length. 64-bit, this machine's byte order, one PT_LOAD mapping the file from
// offset 0 at address 0, so a symbol's value is also its file offset.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <elf.h>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace flamebpf::testing {

// A 234-byte mangled name whose demangling doubles with each of its 20 template arguments
// (each names the one before twice): 27 MB of text.
inline std::string exponential_mangled_name()
{
  std::string name = "_Z1f1X1AIS_S_E"; // f(X, A<X, X>, ...: substitutions X, A, A<X, X>
  auto substitution = [](int index) {
    const char* digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    std::string id;
    for (int n = index; n > 0; n /= 36)
      id.insert(id.begin(), digits[n % 36]);
    return "S" + (index == 0 ? std::string("0") : id) + "_";
  };
  for (int i = 1; i <= 20; ++i)
    name += "S0_I" + substitution(i) + substitution(i) + "E";
  return name;
}

struct SyntheticSymbol {
  std::string name;
  uint64_t value = 0;
  uint64_t size = 0;
  uint8_t type = STT_FUNC;
  // Named from this offset into SyntheticElf::unterminated_tail instead of by name.
  std::optional<uint32_t> in_tail;
};

struct SyntheticElf {
  // Where the code is: kCodeOffset to kCodeOffset + kCodeSize, at the same addresses.
  static constexpr uint64_t kCodeOffset = 0x1000;
  static constexpr uint64_t kCodeSize = 0x1000;

  std::vector<SyntheticSymbol> symbols; // in .symtab, names in .strtab
  // The code's first bytes (at most kCodeSize); nops follow.
  std::string code;
  // Further PROGBITS sections, by name and content, and the header flags of some of them
  // (SHF_COMPRESSED, whose content then starts with an Elf64_Chdr).
  std::vector<std::pair<std::string, std::string>> sections;
  std::map<std::string, uint64_t> section_flags;
  // Hostile headers: a section count in section 0 (extended numbering) instead of the real one,
  // and sizes .symtab and .strtab claim instead of their real ones.
  std::optional<uint64_t> claimed_section_count;
  std::optional<uint64_t> claimed_symtab_size;
  std::optional<uint64_t> claimed_strtab_size;
  // Bytes ending .strtab with no NUL after them, for symbols named inside them (in_tail).
  std::string unterminated_tail;

  std::string bytes() const
  {
    std::string image(kCodeOffset + kCodeSize, '\0');
    std::memset(image.data() + kCodeOffset, 0x90, kCodeSize); // nop
    image.replace(kCodeOffset, std::min<size_t>(code.size(), kCodeSize), code, 0, kCodeSize);

    // Each name once, as linkers write them: symbols of one name share its offset.
    std::string strtab(1, '\0');
    std::map<std::string, Elf64_Word> written;
    std::string symtab(sizeof(Elf64_Sym), '\0');
    for (const auto& symbol : symbols) {
      if (!symbol.in_tail &&
          written.try_emplace(symbol.name, static_cast<Elf64_Word>(strtab.size())).second) {
        strtab += symbol.name;
        strtab.push_back('\0');
      }
    }
    auto tail_at = static_cast<Elf64_Word>(strtab.size());
    strtab += unterminated_tail;
    for (const auto& symbol : symbols) {
      Elf64_Sym entry{};
      entry.st_name = symbol.in_tail ? tail_at + *symbol.in_tail : written.at(symbol.name);
      entry.st_info = ELF64_ST_INFO(STB_GLOBAL, symbol.type);
      entry.st_shndx = 1; // .text
      entry.st_value = symbol.value;
      entry.st_size = symbol.size;
      symtab.append(reinterpret_cast<const char*>(&entry), sizeof entry);
    }
    std::string names(1, '\0');
    auto name = [&](const std::string& text) {
      auto at = static_cast<Elf64_Word>(names.size());
      names += text;
      names.push_back('\0');
      return at;
    };

    std::vector<Elf64_Shdr> headers(1);
    auto add = [&](const std::string& section_name, uint32_t type, const std::string& content) {
      Elf64_Shdr header{};
      header.sh_name = name(section_name);
      header.sh_type = type;
      header.sh_offset = image.size();
      header.sh_size = content.size();
      header.sh_addralign = 1;
      image += content;
      headers.push_back(header);
      return headers.size() - 1;
    };
    Elf64_Shdr text{};
    text.sh_name = name(".text");
    text.sh_type = SHT_PROGBITS;
    text.sh_flags = SHF_ALLOC | SHF_EXECINSTR;
    text.sh_addr = kCodeOffset;
    text.sh_offset = kCodeOffset;
    text.sh_size = kCodeSize;
    headers.push_back(text);
    size_t symtab_index = add(".symtab", SHT_SYMTAB, symtab);
    size_t strtab_index = add(".strtab", SHT_STRTAB, strtab);
    headers[symtab_index].sh_link = static_cast<Elf64_Word>(strtab_index);
    headers[symtab_index].sh_entsize = sizeof(Elf64_Sym);
    if (claimed_symtab_size)
      headers[symtab_index].sh_size = *claimed_symtab_size;
    if (claimed_strtab_size)
      headers[strtab_index].sh_size = *claimed_strtab_size;
    for (const auto& [section_name, content] : sections) {
      size_t index = add(section_name, SHT_PROGBITS, content);
      if (auto flags = section_flags.find(section_name); flags != section_flags.end())
        headers[index].sh_flags = flags->second;
    }
    Elf64_Word shstrtab_name = name(".shstrtab");
    size_t shstrtab_index = add("", SHT_STRTAB, names);
    headers[shstrtab_index].sh_name = shstrtab_name;

    while (image.size() % 8 != 0)
      image.push_back('\0');
    Elf64_Ehdr ehdr{};
    std::memcpy(ehdr.e_ident, ELFMAG, SELFMAG);
    ehdr.e_ident[EI_CLASS] = ELFCLASS64;
    ehdr.e_ident[EI_DATA] = ELFDATA2LSB;
    ehdr.e_ident[EI_VERSION] = EV_CURRENT;
    ehdr.e_type = ET_DYN;
    ehdr.e_machine = EM_X86_64;
    ehdr.e_version = EV_CURRENT;
    ehdr.e_phoff = sizeof ehdr;
    ehdr.e_shoff = image.size();
    ehdr.e_ehsize = sizeof ehdr;
    ehdr.e_phentsize = sizeof(Elf64_Phdr);
    ehdr.e_phnum = 1;
    ehdr.e_shentsize = sizeof(Elf64_Shdr);
    ehdr.e_shnum = static_cast<Elf64_Half>(headers.size());
    ehdr.e_shstrndx = static_cast<Elf64_Half>(shstrtab_index);
    if (claimed_section_count) {
      ehdr.e_shnum = 0;
      headers[0].sh_size = *claimed_section_count;
    }
    for (const auto& header : headers)
      image.append(reinterpret_cast<const char*>(&header), sizeof header);

    Elf64_Phdr load{};
    load.p_type = PT_LOAD;
    load.p_flags = PF_R | PF_X;
    load.p_filesz = kCodeOffset + kCodeSize;
    load.p_memsz = load.p_filesz;
    load.p_align = 0x1000;
    std::memcpy(image.data(), &ehdr, sizeof ehdr);
    std::memcpy(image.data() + sizeof ehdr, &load, sizeof load);
    return image;
  }
};

} // namespace flamebpf::testing
