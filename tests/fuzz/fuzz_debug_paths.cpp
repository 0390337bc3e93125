// What a stripped ELF file says about its debug file (its GNU build ID and .gnu_debuglink, parsed
// by flamebpf's ELF reader) and where it lies, turned into the paths flamebpf opens inside the
// target's root. Whatever the bytes, every path must be absolute and clean (no "", "." or ".."
// component, no NUL) and lie where debug files are looked for: under /usr/lib/debug, or the
// file's own directory or its .debug/ with the link's plain file name.
// Input: the ELF file's path inside its root, a NUL byte, then the ELF image.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <elf.h>
#include <string>
#include <string_view>

#include "common/elf_reader.h"
#include "symbolize/debug_files.h"

using namespace flamebpf;
using namespace flamebpf::symbolize;

namespace {

bool clean(std::string_view path)
{
  if (!path.starts_with('/') || path.find('\0') != std::string_view::npos)
    return false;
  for (size_t at = 0; at < path.size();) {
    size_t next = path.find('/', at + 1);
    if (next == std::string_view::npos)
      next = path.size();
    std::string_view component = path.substr(at + 1, next - at - 1);
    if (component.empty() || component == "." || component == "..")
      return false;
    at = next;
  }
  return true;
}

void check(std::string_view file_path,
           std::string_view build_id,
           const std::optional<DebugLink>& link,
           bool beside_file)
{
  std::string directory(file_path.substr(0, file_path.rfind('/') + 1));
  for (const auto& candidate : debug_candidates(file_path, build_id, link, beside_file)) {
    const std::string& path = candidate.path;
    if (!clean(path))
      std::abort();
    if (candidate.check == DebugCheck::kBuildId) {
      std::string_view rest(path);
      if (!rest.starts_with("/usr/lib/debug/.build-id/") || !rest.ends_with(".debug") ||
          rest.size() != 25 + build_id.size() * 2 + 1 + 6 || rest[27] != '/' ||
          rest.substr(25, rest.size() - 31).find_first_not_of("0123456789abcdef/") !=
              std::string_view::npos)
        std::abort();
      continue;
    }
    // A link candidate: only with a link, named by it, beside the file, in its .debug/, or
    // under /usr/lib/debug.
    if (!link || link->name.find('/') != std::string::npos || !path.ends_with("/" + link->name))
      std::abort();
    std::string parent = path.substr(0, path.size() - link->name.size());
    bool beside = parent == directory || parent == directory + ".debug/";
    if (!(parent == "/usr/lib/debug" + directory) && !(beside_file && beside))
      std::abort();
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  std::string_view input(reinterpret_cast<const char*>(data), size);
  size_t nul = input.find('\0');
  if (nul == std::string_view::npos)
    return 0;
  std::string_view file_path = input.substr(0, nul);
  std::string_view image = input.substr(nul + 1);

  // The link section's parser on raw bytes too.
  auto raw_link = parse_debug_link(image);
  check(file_path, image.substr(0, 20), raw_link, true);

  auto reader = ElfReader::open(ElfBytes::memory(image), "fuzzed");
  if (!reader)
    return 0;
  std::string build_id = reader->build_id();
  if (build_id.size() > kMaxBuildIdBytes)
    std::abort();
  std::optional<DebugLink> link;
  if (const ElfSection* section = reader->section_named(".gnu_debuglink")) {
    if (auto content = reader->read_section(*section, kMaxDebugLinkBytes); content)
      link = parse_debug_link(content->bytes);
  }
  check(file_path, build_id, link, true);
  check(file_path, build_id, link, false);
  // The symbol tables, read as ElfSymbols reads them.
  for (const auto& section : reader->sections()) {
    if (section.type == SHT_SYMTAB || section.type == SHT_DYNSYM) {
      size_t count = 0;
      auto read = reader->read_symbols(section, 1 << 16, [&](const ElfSymbolEntry&) { ++count; });
      if (read && count > (1 << 16))
        std::abort();
    }
  }
  return 0;
}
