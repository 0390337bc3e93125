// Demangling with a bound: a name from a target's symbol table can be a few hundred bytes that
// demangle to megabytes (each substitution may repeat all the text before it), so the output is
// cut at a byte budget and a time budget, and nothing is allocated on the heap on the way.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "symbolize/name_cut.h"

namespace flamebpf::symbolize {

// A demangled name takes at most this many bytes, a cut one ending in kTruncated (name_cut.h).
inline constexpr size_t kMaxDemangledBytes = 4096;
// Longer mangled names are not demangled: the demangler's stack use grows with the input.
inline constexpr size_t kMaxMangledBytes = 4096;
// The demangler stops after this long, whatever it has written (checked as it writes: every 256
// bytes of output at most).
inline constexpr std::chrono::milliseconds kMaxDemangleTime{50};

struct Demangled {
  std::string text; // at most max_bytes
  bool cut = false; // text was cut by a budget and ends in kTruncated
};

// Demangles an Itanium C++ ABI name ("_Z...") and a Rust name, legacy ("_ZN...17h<hash>E") or v0
// ("_R..."), without its hash (as rustfilt and perf show it); other names, and names that do not
// demangle, are returned as they are. Either is cut with cut_name (name_cut.h) if longer than
// max_bytes, which must exceed kTruncated's size.
Demangled demangle_bounded(std::string_view name, size_t max_bytes = kMaxDemangledBytes);

// demangle_bounded's text.
std::string demangle(std::string_view name);

} // namespace flamebpf::symbolize
