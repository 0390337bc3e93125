#include "common/proc_maps.h"

#include <algorithm>
#include <sys/auxv.h>

#include "common/procfs.h"
#include "common/text.h"

namespace flamebpf::procfs {
namespace {

// Consumes a hex number from the front of text up to (and including) the separator.
bool take_hex(std::string_view& text, char separator, uint64_t& out)
{
  size_t end = text.find(separator);
  if (end == std::string_view::npos)
    return false;
  auto number = text::parse_number<uint64_t>(text.substr(0, end), 16);
  if (!number)
    return false;
  out = *number;
  text.remove_prefix(end + 1);
  return true;
}

} // namespace

std::vector<Mapping> parse_proc_maps(std::string_view text)
{
  std::vector<Mapping> mappings;
  for (std::string_view line : text::lines(text)) {
    // 7f1c2a000000-7f1c2a022000 r-xp 00002000 08:01 131 /usr/lib/x86_64-linux-gnu/libc.so.6
    Mapping mapping;
    uint64_t major = 0;
    uint64_t minor = 0;
    if (!take_hex(line, '-', mapping.start) || !take_hex(line, ' ', mapping.end))
      continue;
    if (line.size() < 5 || line[4] != ' ')
      continue;
    mapping.executable = line[2] == 'x';
    line.remove_prefix(5);
    if (!take_hex(line, ' ', mapping.offset) || !take_hex(line, ':', major) ||
        !take_hex(line, ' ', minor))
      continue;
    size_t inode_end = line.find(' ');
    auto inode = text::parse_number<decltype(mapping.inode)>(line.substr(0, inode_end));
    if (!inode || mapping.end <= mapping.start)
      continue;
    mapping.inode = *inode;
    if (inode_end != std::string_view::npos) {
      std::string_view path = line.substr(inode_end);
      size_t path_start = path.find_first_not_of(' ');
      if (path_start != std::string_view::npos)
        mapping.path = std::string(path.substr(path_start));
    }
    mapping.device_major = static_cast<uint32_t>(major);
    mapping.device_minor = static_cast<uint32_t>(minor);
    mappings.push_back(std::move(mapping));
  }
  return mappings;
}

std::string_view own_vdso_image()
{
  static const std::string_view image = []() -> std::string_view {
    auto address = getauxval(AT_SYSINFO_EHDR);
    if (address == 0)
      return {};
    auto maps = read_file("/proc/self/maps", size_t{4} << 20);
    if (!maps)
      return {};
    for (const auto& mapping : parse_proc_maps(*maps)) {
      if (mapping.path == "[vdso]" && mapping.start == address)
        return {reinterpret_cast<const char*>(address), mapping.end - mapping.start};
    }
    return {};
  }();
  return image;
}

} // namespace flamebpf::procfs
