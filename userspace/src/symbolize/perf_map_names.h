// Frames for the names perf maps give JIT code, whoever wrote the map (a runtime may name its own
// code otherwise: runtimes/). Java methods get one display form whatever wrote
// the map: "org.example.Foo.bar" (with "(long, int[])" when signatures are wanted), from
//   flamebpf's agent        org.example.Foo.bar(long, int[])      (inlining: "A.run()->B.c()")
//   the JDK (jcmd)          long org.example.Foo.bar(long, int[])
//   perf-map-agent          Lorg/example/Foo;::bar  or  org.example.Foo::bar(J[I)J
// The interpreter, stubs and other JITs' names are kept as they are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "profile/symbolized_profile.h"
#include "runtimes/runtime.h"
#include "symbolize/perf_map.h"

namespace flamebpf::symbolize {

// The frames one perf-map name may give: Java's JITs inline at most 15 methods deep by default
// (MaxInlineLevel), so a real chain has at most 16.
inline constexpr size_t kMaxInlineFrames = 64;

// The frames of one perf-map name, outermost first: a compiled Java method is a kJit frame and
// each method inlined into it a kInlined frame after it; any other name is one kNative frame.
// A chain of more than kMaxInlineFrames methods keeps its first ones and ends in a kTruncated
// frame (kUnknown), as does a chain the perf-map reader cut short (ending in "->[truncated]").
// dropped, if given, grows by the number of methods left out.
std::vector<profile::Frame>
perf_map_frames(std::string_view name, bool java_signatures, uint64_t* dropped = nullptr);

// The frames of the code a perf map's entry names (perf_map_frames), with what budgets cut.
runtimes::NamedCode perf_map_code(const PerfMapTable::Entry& entry, bool java_signatures);

// "org.example.Foo.bar" (with "(params)" when signatures are wanted) for one Java method in any
// of the spellings above; nullopt if text is none of them.
std::optional<std::string> java_method_name(std::string_view text, bool signatures);

} // namespace flamebpf::symbolize
