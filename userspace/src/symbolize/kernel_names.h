// Names of kernel code addresses, from one of two sources: the kernel itself through a BPF program
// (bpf_snprintf's %ps), for just the addresses sampled and with only CAP_BPF and CAP_PERFMON, or,
// on kernels that cannot run it, /proc/kallsyms (whose addresses need CAP_SYSLOG as well).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "symbolize/kallsyms.h"

namespace flamebpf::symbolize {

class KernelNames {
public:
  virtual ~KernelNames() = default;
  // Names, at once, every address the following lookups will ask for.
  virtual void prepare(const std::vector<uint64_t>& addresses) { (void)addresses; }
  // The function containing address; the views stay valid until the next prepare().
  virtual std::optional<KernelSymbol> lookup(uint64_t address) const = 0;
  // Where the names come from, for the log.
  virtual std::string source() const = 0;
};

// /proc/kallsyms' table.
class KallsymsNames final : public KernelNames {
public:
  explicit KallsymsNames(KernelSymbols symbols) : symbols_(std::move(symbols)) {}
  std::optional<KernelSymbol> lookup(uint64_t address) const override
  {
    return symbols_.lookup(address);
  }
  std::string source() const override { return "/proc/kallsyms"; }

private:
  KernelSymbols symbols_;
};

// Asks the kernel, FB_KERNEL_NAMES_BATCH addresses per run of the program, and remembers the
// answers (up to kMaxRemembered addresses; beyond, it starts over).
class BpfKernelNames final : public KernelNames {
public:
  BpfKernelNames(BpfKernelNames&&) noexcept;
  BpfKernelNames& operator=(BpfKernelNames&&) noexcept;
  ~BpfKernelNames() override;

  // Loads the program; fails without CAP_BPF and CAP_PERFMON (or on kernels before 5.14).
  [[nodiscard]] static Result<BpfKernelNames> load();

  void prepare(const std::vector<uint64_t>& addresses) override;
  std::optional<KernelSymbol> lookup(uint64_t address) const override;
  std::string source() const override { return "the kernel (BPF %ps)"; }

  static constexpr size_t kMaxRemembered = 1 << 16;

private:
  struct Program;
  struct Named {
    std::string name; // empty: no symbol
    std::string module;
  };
  explicit BpfKernelNames(std::unique_ptr<Program> program);
  // Names one batch of addresses into named_.
  void name_batch(const uint64_t* addresses, size_t count);

  std::unique_ptr<Program> program_;
  std::unordered_map<uint64_t, Named> named_;
  bool failure_reported_ = false;
};

// Splits what %ps prints ("name", "name [module]", or the bare address "0x…" where no symbol
// covers it) into name and module; the name is empty for a bare address.
void parse_printed_symbol(std::string_view printed, std::string& name, std::string& module);

// The BPF source where the kernel runs it (5.14+), else /proc/kallsyms if its addresses are
// visible; fails if neither works, naming what is missing.
[[nodiscard]] Result<std::unique_ptr<KernelNames>> load_kernel_names();

} // namespace flamebpf::symbolize
