// Symbol names as a target's ELF files hold them: any bytes, C++'s and Rust's (legacy and v0)
// manglings among them. The bounded demangler must never write more than its budget plus the mark,
// never crash, and return quickly even for names whose demangling is exponential in their length
// (libFuzzer's -timeout catches a slow one).
// Input: one budget byte (the budget is 16 times it, plus 16), then the name.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "symbolize/demangle.h"

using flamebpf::symbolize::demangle_bounded;
using flamebpf::symbolize::kMaxDemangledBytes;
using flamebpf::symbolize::kTruncated;

namespace {

void check(std::string_view name, size_t budget)
{
  auto demangled = demangle_bounded(name, budget);
  if (demangled.text.size() > budget)
    std::abort();
  // A cut name says so, and only a cut one (unless the name itself holds the mark, which its
  // demangling may then end with).
  bool holds_mark = name.find(kTruncated) != std::string_view::npos;
  if (demangled.cut != demangled.text.ends_with(kTruncated) && !holds_mark)
    std::abort();
  // What is not mangled comes back as it is, or its start, marked.
  size_t kept = demangled.cut ? demangled.text.size() - kTruncated.size() : demangled.text.size();
  bool mangled = name.starts_with("_Z") || name.starts_with("_R");
  if (!mangled && demangled.text.substr(0, kept) != name.substr(0, kept))
    std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  if (size == 0)
    return 0;
  size_t budget = size_t{data[0]} * 16 + 16;
  std::string_view name(reinterpret_cast<const char*>(data + 1), size - 1);
  check(name, budget);
  check(name, kMaxDemangledBytes);
  return 0;
}
