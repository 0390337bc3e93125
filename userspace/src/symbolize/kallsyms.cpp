#include "symbolize/kallsyms.h"

#include <algorithm>
#include <charconv>

#include "common/procfs.h"

namespace flamebpf::symbolize {

Result<KernelSymbols> KernelSymbols::parse(std::string_view text)
{
  KernelSymbols result;
  bool any_nonzero = false;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos)
      end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    // "ffffffffc0a01000 t nft_do_chain\t[nf_tables]"
    size_t first_space = line.find(' ');
    if (first_space == std::string_view::npos || first_space + 3 > line.size())
      continue;
    uint64_t address = 0;
    auto [ptr, ec] = std::from_chars(line.data(), line.data() + first_space, address, 16);
    if (ec != std::errc() || ptr != line.data() + first_space)
      continue;
    char type = line[first_space + 1];
    if (type != 't' && type != 'T' && type != 'w' && type != 'W')
      continue;
    std::string_view rest = line.substr(first_space + 3);
    std::string_view module;
    size_t tab = rest.find('\t');
    if (tab != std::string_view::npos) {
      module = rest.substr(tab + 1);
      rest = rest.substr(0, tab);
      if (module.size() >= 2 && module.front() == '[' && module.back() == ']')
        module = module.substr(1, module.size() - 2);
    }
    if (rest.empty())
      continue;
    any_nonzero |= address != 0;
    result.symbols_.push_back({address, std::string(rest), std::string(module)});
  }
  if (result.symbols_.empty())
    return fail(error("no kernel function symbols found"));
  if (!any_nonzero)
    return fail(error("kernel symbol addresses are hidden (all zero); run as root or set "
                      "kernel.kptr_restrict=0"));
  std::stable_sort(result.symbols_.begin(), result.symbols_.end(),
                   [](const auto& a, const auto& b) { return a.address < b.address; });
  return result;
}

Result<KernelSymbols> KernelSymbols::load(const std::string& path)
{
  auto text = procfs::read_file(path, 256 << 20);
  if (!text)
    return fail(text.error());
  auto parsed = parse(*text);
  if (!parsed)
    return fail(error(path + ": " + parsed.error().message));
  return parsed;
}

const KernelSymbol* KernelSymbols::lookup(uint64_t address) const
{
  auto it =
      std::upper_bound(symbols_.begin(), symbols_.end(), address,
                       [](uint64_t value, const auto& symbol) { return value < symbol.address; });
  if (it == symbols_.begin())
    return nullptr;
  return &*std::prev(it);
}

} // namespace flamebpf::symbolize
