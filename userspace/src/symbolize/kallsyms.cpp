#include "symbolize/kallsyms.h"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

#include "common/text.h"
#include "common/unique_fd.h"

namespace flamebpf::symbolize {

void KernelSymbols::add_line(std::string_view line)
{
  // "ffffffffc0a01000 t nft_do_chain\t[nf_tables]"
  size_t first_space = line.find(' ');
  if (first_space == std::string_view::npos || first_space + 3 > line.size())
    return;
  auto parsed = text::parse_number<uint64_t>(line.substr(0, first_space), 16);
  if (!parsed)
    return;
  uint64_t address = *parsed;
  char type = line[first_space + 1];
  if ((type != 't' && type != 'T' && type != 'w' && type != 'W') || line[first_space + 2] != ' ')
    return;
  std::string_view name = line.substr(first_space + 3);
  std::string_view module;
  size_t tab = name.find('\t');
  if (tab != std::string_view::npos) {
    module = name.substr(tab + 1);
    name = name.substr(0, tab);
    if (module.size() >= 2 && module.front() == '[' && module.back() == ']')
      module = module.substr(1, module.size() - 2);
  }
  if (name.empty() || name.size() > UINT16_MAX)
    return;
  uint16_t module_index = 0;
  if (!module.empty()) {
    // Module symbols come grouped, so the last module is almost always the one.
    auto it = std::find(modules_.rbegin(), modules_.rend(), module);
    if (it != modules_.rend()) {
      module_index = static_cast<uint16_t>(modules_.rend() - it - 1);
    } else if (modules_.size() < UINT16_MAX) {
      module_index = static_cast<uint16_t>(modules_.size());
      modules_.emplace_back(module);
    }
  }
  any_nonzero_ |= address != 0;
  entries_.push_back({address, static_cast<uint32_t>(names_.size()),
                      static_cast<uint16_t>(name.size()), module_index});
  names_.append(name);
}

Result<> KernelSymbols::finish()
{
  if (entries_.empty())
    return fail(error("no kernel function symbols found"));
  if (!any_nonzero_)
    return fail(error("kernel symbol addresses are hidden (all zero); run as root or set "
                      "kernel.kptr_restrict=0"));
  std::stable_sort(entries_.begin(), entries_.end(),
                   [](const Entry& a, const Entry& b) { return a.address < b.address; });
  entries_.shrink_to_fit();
  names_.shrink_to_fit();
  return {};
}

Result<KernelSymbols> KernelSymbols::parse(std::string_view text)
{
  KernelSymbols result;
  for (std::string_view line : text::lines(text))
    result.add_line(line);
  if (auto finished = result.finish(); !finished)
    return fail(finished.error());
  return result;
}

Result<KernelSymbols> KernelSymbols::load(const std::string& path)
{
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid())
    return fail(system_error(errno, "cannot open " + path));
  KernelSymbols result;
  std::string pending;
  char buffer[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return fail(system_error(errno, "cannot read " + path));
    if (n == 0)
      break;
    pending.append(buffer, static_cast<size_t>(n));
    // The complete lines; the rest waits for the next read.
    size_t last_newline = pending.rfind('\n');
    size_t complete = last_newline == std::string::npos ? 0 : last_newline + 1;
    for (std::string_view line : text::lines(std::string_view(pending).substr(0, complete)))
      result.add_line(line);
    pending.erase(0, complete);
  }
  result.add_line(pending);
  if (auto finished = result.finish(); !finished)
    return fail(error(path + ": " + finished.error().message));
  return result;
}

std::optional<KernelSymbol> KernelSymbols::lookup(uint64_t address) const
{
  auto it =
      std::upper_bound(entries_.begin(), entries_.end(), address,
                       [](uint64_t value, const Entry& entry) { return value < entry.address; });
  if (it == entries_.begin())
    return std::nullopt;
  const Entry& entry = *std::prev(it);
  return KernelSymbol{entry.address,
                      std::string_view(names_).substr(entry.name_offset, entry.name_length),
                      modules_[entry.module_index]};
}

} // namespace flamebpf::symbolize
