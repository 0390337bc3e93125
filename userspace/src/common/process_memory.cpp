#include "common/process_memory.h"

#include <algorithm>
#include <sys/uio.h>

namespace flamebpf {

bool ProcessMemory::read(uint64_t address, void* out, size_t bytes) const
{
  // A read costs a system call however small: the budget also bounds how many are made.
  uint64_t charge = std::max<uint64_t>(bytes, kMinReadCharge);
  if (spent_ + charge > budget_) {
    spent_ = budget_;
    return false;
  }
  spent_ += charge;
  iovec local{out, bytes};
  iovec remote{reinterpret_cast<void*>(address), bytes};
  ssize_t n = ::process_vm_readv(static_cast<pid_t>(pid_), &local, 1, &remote, 1, 0);
  return n == static_cast<ssize_t>(bytes);
}

} // namespace flamebpf
