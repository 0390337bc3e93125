// Whether a process is a JVM flamebpf can attach to, from the files it maps. Both the symbolizer
// (which keeps a JVM's perf map open from its first sample) and the attacher (which checks again
// just before attaching) ask.
#pragma once

#include <vector>

#include "common/proc_maps.h"

namespace flamebpf::hotspot {

// What a process's mapped files say about it as a JVM.
struct JvmTraits {
  bool hotspot = false;        // libjvm.so is mapped, and OpenJ9's VM is not
  bool keeps_perf_map = false; // an agent that keeps /tmp/perf-<pid>.map current is loaded
  // The java launcher's libjli.so is mapped: a JVM once it loads libjvm.so, which it does after
  // its first samples may have been taken.
  bool launcher = false;
};

// Reads the traits off a process's mappings (any mapping counts, executable or not).
JvmTraits jvm_traits(const std::vector<procfs::Mapping>& mappings);

} // namespace flamebpf::hotspot
