// Frames for the names perf maps give JIT code. Java methods get one display form whatever wrote
// the map: "org.example.Foo.bar" (with "(long, int[])" when signatures are wanted), from
//   flamebpf's agent        org.example.Foo.bar(long, int[])      (inlining: "A.run()->B.c()")
//   the JDK (jcmd)          long org.example.Foo.bar(long, int[])
//   perf-map-agent          Lorg/example/Foo;::bar  or  org.example.Foo::bar(J[I)J
// The interpreter, stubs and other JITs' names are kept as they are.
#pragma once

#include <string_view>
#include <vector>

#include "profile/symbolized_profile.h"

namespace flamebpf::symbolize {

// The frames of one perf-map name, outermost first: a compiled Java method is a kJit frame and
// each method inlined into it a kInlined frame after it; any other name is one kNative frame.
std::vector<profile::Frame> perf_map_frames(std::string_view name, bool java_signatures);

} // namespace flamebpf::symbolize
