// Symbol names as a target's ELF files hold them: any bytes. The bounded demangler must never
// write more than its budget plus the mark, never crash, and return quickly even for names whose
// demangling is exponential in their length (libFuzzer's -timeout catches a slow one).
// Input: one budget byte (the budget is 16 times it, plus 1), then the name.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "symbolize/demangle.h"

using flamebpf::symbolize::demangle_bounded;
using flamebpf::symbolize::kMaxDemangledBytes;
using flamebpf::symbolize::kTruncatedMark;

namespace {

void check(std::string_view name, size_t budget)
{
  auto demangled = demangle_bounded(name, budget);
  if (demangled.text.size() > budget + kTruncatedMark.size())
    std::abort();
  // A cut name says so, and only a cut one.
  if (demangled.cut != demangled.text.ends_with(kTruncatedMark) && !name.ends_with(kTruncatedMark))
    std::abort();
  // What is not mangled comes back as it is, or its start, marked.
  if (!name.starts_with("_Z") && demangled.text.substr(0, std::min(name.size(), budget)) !=
                                     name.substr(0, std::min(name.size(), budget)))
    std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  if (size == 0)
    return 0;
  size_t budget = size_t{data[0]} * 16 + 1;
  std::string_view name(reinterpret_cast<const char*>(data + 1), size - 1);
  check(name, budget);
  check(name, kMaxDemangledBytes);
  return 0;
}
