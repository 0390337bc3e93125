#include "symbolize/elf_symbols.h"

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
  UniqueFd fd;
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
  session->fd = std::move(fd);
  // libdwfl reads through the descriptor but does not close one it was given.
  session->module =
      dwfl_report_offline(session->dwfl, path.c_str(), path.c_str(), session->fd.get());
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
  if (dwfl_module_getsymtab(session->module) < 0)
    session->segments.clear(); // no symbols at all: every lookup reports "unknown"

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

std::optional<std::string> ElfSymbols::symbolize_file_offset(uint64_t file_offset) const
{
  auto match = match_file_offset(file_offset);
  if (!match)
    return std::nullopt;
  return std::move(match->name);
}

std::optional<ElfSymbols::SymbolMatch> ElfSymbols::match_file_offset(uint64_t file_offset) const
{
  auto vaddr = file_offset_to_vaddr(file_offset);
  if (!vaddr)
    return std::nullopt;
  GElf_Off symbol_offset = 0;
  GElf_Sym symbol;
  const char* name = dwfl_module_addrinfo(session_->module, *vaddr + session_->bias, &symbol_offset,
                                          &symbol, nullptr, nullptr, nullptr);
  if (!name || !*name)
    return std::nullopt;
  return SymbolMatch{demangle(name), symbol_offset};
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
