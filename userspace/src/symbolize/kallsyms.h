// Kernel symbols from /proc/kallsyms.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace flamebpf::symbolize {

struct KernelSymbol {
  uint64_t address = 0;
  std::string name;
  std::string module; // e.g. "nf_tables"; empty for the core kernel
};

class KernelSymbols {
public:
  // Parses kallsyms text, keeping function symbols (types t, T, w, W). Fails if every address is
  // zero, which is what an unprivileged reader sees.
  [[nodiscard]] static Result<KernelSymbols> parse(std::string_view text);
  // Reads and parses the file at path (default /proc/kallsyms).
  [[nodiscard]] static Result<KernelSymbols> load(const std::string& path = "/proc/kallsyms");

  // The function containing address: the nearest symbol at or below it.
  const KernelSymbol* lookup(uint64_t address) const;

  size_t size() const { return symbols_.size(); }

private:
  std::vector<KernelSymbol> symbols_; // sorted by address
};

} // namespace flamebpf::symbolize
