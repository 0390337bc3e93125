// Kernel symbols from /proc/kallsyms.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace flamebpf::symbolize {

// A symbol as returned by lookup(); the views point into the KernelSymbols that returned it.
struct KernelSymbol {
  uint64_t address = 0;
  std::string_view name;
  std::string_view module; // e.g. "nf_tables"; empty for the core kernel
};

class KernelSymbols {
public:
  // Parses kallsyms text, keeping function symbols (types t, T, w, W). Fails if every address is
  // zero, which is what an unprivileged reader sees.
  [[nodiscard]] static Result<KernelSymbols> parse(std::string_view text);
  // Reads and parses the file at path (default /proc/kallsyms) without holding it all in memory.
  [[nodiscard]] static Result<KernelSymbols> load(const std::string& path = "/proc/kallsyms");

  // The function containing address: the nearest symbol at or below it.
  std::optional<KernelSymbol> lookup(uint64_t address) const;

  size_t size() const { return entries_.size(); }

private:
  // Adds one kallsyms line if it is a function symbol.
  void add_line(std::string_view line);
  // Sorts and validates after the last add_line.
  Result<> finish();

  // 16 bytes per symbol, names in one arena: /proc/kallsyms has 100k+ functions.
  struct Entry {
    uint64_t address;
    uint32_t name_offset;
    uint16_t name_length;
    uint16_t module_index; // 0: core kernel
  };
  std::vector<Entry> entries_; // sorted by address after finish()
  std::string names_;          // every name, back to back
  std::vector<std::string> modules_{""};
  bool any_nonzero_ = false;
};

} // namespace flamebpf::symbolize
