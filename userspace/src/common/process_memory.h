// Another process's memory, read with process_vm_readv (which needs CAP_SYS_PTRACE over it, or to
// be its parent) within a budget of bytes, each read counted as at least kMinReadCharge: what a
// runtime's structures are read from outside through. What it reads is hostile: a caller checks
// every value before it follows one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace flamebpf {

class ProcessMemory {
public:
  static constexpr uint64_t kMinReadCharge = 64;
  explicit ProcessMemory(uint32_t host_pid) : pid_(host_pid) {}

  // Copies bytes from address into out; false if any of them cannot be read, or the budget is
  // spent.
  bool read(uint64_t address, void* out, size_t bytes) const;
  template <class T> std::optional<T> load(uint64_t address) const
  {
    T value;
    if (!read(address, &value, sizeof value))
      return std::nullopt;
    return value;
  }

  // A new budget, counted from now.
  void renew_budget(uint64_t bytes)
  {
    budget_ = bytes;
    spent_ = 0;
  }
  bool budget_spent() const { return spent_ >= budget_; }
  uint64_t spent() const { return spent_; }
  uint32_t pid() const { return pid_; }

private:
  uint32_t pid_;
  uint64_t budget_ = 0;
  mutable uint64_t spent_ = 0;
};

} // namespace flamebpf
