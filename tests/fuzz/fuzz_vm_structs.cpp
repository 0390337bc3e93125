// A JVM's memory as flamebpf reads it from outside (symbolize/hotspot_code.h): any bytes. The
// input is an address space: its first 96 bytes are libjvm's twelve layout symbols, and the whole
// of it is mapped at kBase. Reading the VMStructs tables and finding blobs in the code heaps they
// describe must never crash, never read outside the input, and stay within the entry and hop
// bounds however the tables and segment maps point.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "code_blobs.h"
#include "vm_memory.h"
#include "vm_structs.h"

using namespace flamebpf::agent;

namespace {

constexpr uint64_t kBase = 0x10000;

class InputMemory final : public VmMemory {
public:
  InputMemory(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool read(uint64_t address, void* out, size_t bytes) const override
  {
    ++reads;
    if (address < kBase || address - kBase > size_ || bytes > size_ - (address - kBase))
      return false;
    std::memcpy(out, data_ + (address - kBase), bytes);
    return true;
  }
  mutable uint64_t reads = 0;

private:
  const uint8_t* data_;
  size_t size_;
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  uint64_t values[12] = {};
  if (size < sizeof values)
    return 0;
  std::memcpy(values, data, sizeof values);
  InputMemory memory(data, size);
  std::string why;
  auto layout = VmStructs::layout_of(values, &why);
  if (!layout)
    return 0;
  constexpr size_t kMaxEntries = 512;
  auto structs = VmStructs::from_layout(*layout, memory, kMaxEntries);
  // Each entry costs a bounded number of reads (names are read 64 bytes at a time, up to 256).
  if (structs.fields() > kMaxEntries || structs.types() > kMaxEntries ||
      memory.reads > 2 * kMaxEntries * 20)
    std::abort();
  auto finder = CodeBlobFinder::make(structs, &why);
  if (!finder)
    return 0;
  for (uint64_t address = kBase; address < kBase + size; address += 1 + size / 8) {
    memory.reads = 0;
    auto blob = finder->find(memory, address);
    // At most 16 heaps of a few reads each, and 4,096 hops.
    if (memory.reads > 16 * 8 + 4096 + 16)
      std::abort();
    if (blob && (blob->code_begin >= blob->code_end || address >= blob->code_end))
      std::abort();
  }
  return 0;
}
