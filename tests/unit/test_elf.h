// An ELF reader for unit tests, independent of flamebpf's own.
#pragma once

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/unique_fd.h"

namespace flamebpf::testing {

// An independent reader of ELF files (plain libelf), for the facts tests check flamebpf's code and
// build against: symbol values, program headers and the build ID note.
class FixtureElf {
public:
  explicit FixtureElf(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC))
  {
    elf_version(EV_CURRENT);
    if (fd_.valid())
      elf_ = elf_begin(fd_.get(), ELF_C_READ, nullptr);
  }
  ~FixtureElf()
  {
    if (elf_)
      elf_end(elf_);
  }
  FixtureElf(const FixtureElf&) = delete;
  FixtureElf& operator=(const FixtureElf&) = delete;

  bool valid() const { return elf_ != nullptr; }

  // Each named entry of the sections of section_type (SHT_SYMTAB, SHT_DYNSYM), with its name.
  std::vector<std::pair<std::string, GElf_Sym>> symbols(Elf64_Word section_type) const
  {
    std::vector<std::pair<std::string, GElf_Sym>> result;
    Elf_Scn* section = nullptr;
    while (elf_ && (section = elf_nextscn(elf_, section)) != nullptr) {
      GElf_Shdr header;
      if (!gelf_getshdr(section, &header) || header.sh_type != section_type)
        continue;
      Elf_Data* data = elf_getdata(section, nullptr);
      size_t count = header.sh_entsize ? header.sh_size / header.sh_entsize : 0;
      for (size_t i = 0; data && i < count; ++i) {
        GElf_Sym symbol;
        if (!gelf_getsym(data, static_cast<int>(i), &symbol))
          continue;
        const char* name = elf_strptr(elf_, header.sh_link, symbol.st_name);
        if (name && *name)
          result.emplace_back(name, symbol);
      }
    }
    return result;
  }

  // The .symtab entry named name.
  std::optional<GElf_Sym> symbol(const std::string& name) const
  {
    for (const auto& [symbol_name, symbol] : symbols(SHT_SYMTAB))
      if (symbol_name == name)
        return symbol;
    return std::nullopt;
  }

  std::vector<GElf_Phdr> loads() const
  {
    std::vector<GElf_Phdr> result;
    size_t count = 0;
    if (elf_getphdrnum(elf_, &count) != 0)
      return result;
    for (size_t i = 0; i < count; ++i) {
      GElf_Phdr header;
      if (gelf_getphdr(elf_, static_cast<int>(i), &header) && header.p_type == PT_LOAD)
        result.push_back(header);
    }
    return result;
  }

  // The PT_LOAD holding vaddr in the file.
  std::optional<GElf_Phdr> load_of(uint64_t vaddr) const
  {
    for (const auto& header : loads()) {
      if (vaddr >= header.p_vaddr && vaddr < header.p_vaddr + header.p_filesz)
        return header;
    }
    return std::nullopt;
  }

  // The file offset holding the byte at link-time address vaddr.
  std::optional<uint64_t> vaddr_to_offset(uint64_t vaddr) const
  {
    auto header = load_of(vaddr);
    if (!header)
      return std::nullopt;
    return vaddr - header->p_vaddr + header->p_offset;
  }

  // Whether any PT_LOAD maps the byte at file offset.
  bool offset_loaded(uint64_t offset) const
  {
    for (const auto& header : loads()) {
      if (offset >= header.p_offset && offset < header.p_offset + header.p_filesz)
        return true;
    }
    return false;
  }

  // The NT_GNU_BUILD_ID note as lowercase hex.
  std::string build_id() const
  {
    Elf_Scn* section = nullptr;
    while ((section = elf_nextscn(elf_, section)) != nullptr) {
      GElf_Shdr header;
      if (!gelf_getshdr(section, &header) || header.sh_type != SHT_NOTE)
        continue;
      Elf_Data* data = elf_getdata(section, nullptr);
      GElf_Nhdr note;
      size_t name_offset = 0;
      size_t desc_offset = 0;
      for (size_t offset = 0;
           data && (offset = gelf_getnote(data, offset, &note, &name_offset, &desc_offset)) > 0;) {
        if (note.n_type != NT_GNU_BUILD_ID || note.n_namesz != 4)
          continue;
        const auto* bytes = static_cast<const unsigned char*>(data->d_buf) + desc_offset;
        std::string hex;
        for (size_t i = 0; i < note.n_descsz; ++i) {
          static const char kHex[] = "0123456789abcdef";
          hex.push_back(kHex[bytes[i] >> 4]);
          hex.push_back(kHex[bytes[i] & 0xf]);
        }
        return hex;
      }
    }
    return "";
  }

private:
  UniqueFd fd_;
  Elf* elf_ = nullptr;
};

} // namespace flamebpf::testing
