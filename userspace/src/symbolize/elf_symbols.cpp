#include "symbolize/elf_symbols.h"

#include <algorithm>
#include <cstdlib>
#include <cxxabi.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <vector>

namespace flamebpf::symbolize {

struct ElfSymbols::Session {
  // libdwfl keeps pointers to both, so they live as long as the session.
  std::string debuginfo_path;
  char* debuginfo_path_pointer = nullptr;
  Dwfl_Callbacks callbacks{};
  Dwfl* dwfl = nullptr;
  Dwfl_Module* module = nullptr;
  struct Segment {
    uint64_t offset;
    uint64_t file_size;
    uint64_t vaddr;
  };
  std::vector<Segment> segments;
  uint64_t bias = 0;

  ~Session()
  {
    if (dwfl)
      dwfl_end(dwfl);
  }
};

ElfSymbols::~ElfSymbols() = default;

Result<std::unique_ptr<ElfSymbols>>
ElfSymbols::open(UniqueFd fd, const std::string& path, const std::string& debug_root)
{
  std::unique_ptr<ElfSymbols> symbols(new ElfSymbols());
  auto session = std::make_unique<Session>();
  // "" = beside the file, ".debug" = its .debug subdirectory, then the root's /usr/lib/debug.
  session->debuginfo_path = ":.debug:" + debug_root + "/usr/lib/debug";
  session->debuginfo_path_pointer = session->debuginfo_path.data();
  session->callbacks.find_debuginfo = dwfl_standard_find_debuginfo;
  session->callbacks.section_address = dwfl_offline_section_address;
  session->callbacks.debuginfo_path = &session->debuginfo_path_pointer;
  session->dwfl = dwfl_begin(&session->callbacks);
  if (!session->dwfl)
    return fail(error("cannot start libdwfl: " + std::string(dwfl_errmsg(-1))));
  // On success libdwfl owns the descriptor (it may read the file and close it at once); on
  // failure it is still ours.
  session->module = dwfl_report_offline(session->dwfl, path.c_str(), path.c_str(), fd.get());
  if (session->module)
    fd.release();
  if (!session->module || dwfl_report_end(session->dwfl, nullptr, nullptr) != 0)
    return fail(error("cannot read ELF " + path + ": " + dwfl_errmsg(-1)));

  GElf_Addr bias = 0;
  Elf* elf = dwfl_module_getelf(session->module, &bias);
  if (!elf)
    return fail(error("cannot read ELF " + path + ": " + dwfl_errmsg(-1)));
  session->bias = bias;
  size_t header_count = 0;
  if (elf_getphdrnum(elf, &header_count) != 0)
    return fail(error("cannot read program headers of " + path));
  for (size_t i = 0; i < header_count; ++i) {
    GElf_Phdr header;
    if (gelf_getphdr(elf, static_cast<int>(i), &header) && header.p_type == PT_LOAD)
      session->segments.push_back({header.p_offset, header.p_filesz, header.p_vaddr});
  }

  // Reading the symbol table now finds debug files while the process (and its root) exists.
  int symbol_count = dwfl_module_getsymtab(session->module);
  for (int i = 1; i < symbol_count; ++i) {
    GElf_Sym symbol;
    GElf_Addr address = 0;
    GElf_Word section = 0;
    const char* name =
        dwfl_module_getsym_info(session->module, i, &symbol, &address, &section, nullptr, nullptr);
    if (!name || !*name || section == SHN_UNDEF || section == SHN_ABS || address == 0)
      continue;
    int type = GELF_ST_TYPE(symbol.st_info);
    if (type == STT_FUNC || type == STT_GNU_IFUNC || type == STT_NOTYPE)
      symbols->symbols_.push_back({address, symbol.st_size, name});
  }
  // By address; among aliases at one address, sized symbols last, so lookups meet them first.
  std::stable_sort(symbols->symbols_.begin(), symbols->symbols_.end(),
                   [](const Symbol& a, const Symbol& b) {
                     if (a.address != b.address)
                       return a.address < b.address;
                     return (a.size != 0) < (b.size != 0);
                   });
  symbols->symbols_.shrink_to_fit();

  const unsigned char* id_bits = nullptr;
  GElf_Addr id_vaddr = 0;
  int id_length = dwfl_module_build_id(session->module, &id_bits, &id_vaddr);
  static const char kHex[] = "0123456789abcdef";
  for (int i = 0; i < id_length; ++i) {
    symbols->build_id_.push_back(kHex[id_bits[i] >> 4]);
    symbols->build_id_.push_back(kHex[id_bits[i] & 0xf]);
  }
  symbols->session_ = std::move(session);
  return symbols;
}

std::optional<uint64_t> ElfSymbols::file_offset_to_vaddr(uint64_t file_offset) const
{
  for (const auto& segment : session_->segments) {
    if (file_offset >= segment.offset && file_offset < segment.offset + segment.file_size)
      return file_offset - segment.offset + segment.vaddr;
  }
  return std::nullopt;
}

const ElfSymbols::Symbol* ElfSymbols::find_symbol(uint64_t address) const
{
  auto after = std::upper_bound(symbols_.begin(), symbols_.end(), address,
                                [](uint64_t value, const Symbol& s) { return value < s.address; });
  if (after == symbols_.begin())
    return nullptr;
  const Symbol& nearest = *std::prev(after);
  if (nearest.size == 0 || address < nearest.address + nearest.size)
    return &nearest;
  // Past the nearest symbol's end: a larger symbol starting a little earlier may enclose it.
  auto first = after - std::min<ptrdiff_t>(after - symbols_.begin(), 16);
  for (auto it = std::prev(after); it != first;) {
    --it;
    if (it->size != 0 && address < it->address + it->size)
      return &*it;
  }
  return nullptr;
}

std::optional<ElfSymbols::SymbolMatch> ElfSymbols::match_file_offset(uint64_t file_offset) const
{
  auto vaddr = file_offset_to_vaddr(file_offset);
  if (!vaddr)
    return std::nullopt;
  uint64_t address = *vaddr + session_->bias;
  const Symbol* symbol = find_symbol(address);
  if (!symbol)
    return std::nullopt;
  auto [it, inserted] = demangled_.try_emplace(symbol->name);
  if (inserted)
    it->second = demangle(symbol->name);
  return SymbolMatch{it->second, address - symbol->address};
}

std::optional<std::string> ElfSymbols::symbolize_file_offset(uint64_t file_offset) const
{
  auto match = match_file_offset(file_offset);
  if (!match)
    return std::nullopt;
  return std::move(match->name);
}

std::string demangle(const char* name)
{
  if (name[0] != '_' || name[1] != 'Z')
    return name;
  int status = 0;
  char* demangled = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || !demangled)
    return name;
  std::string result(demangled);
  std::free(demangled);
  return result;
}

} // namespace flamebpf::symbolize
