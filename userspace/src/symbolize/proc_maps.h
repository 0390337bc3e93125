// Parsing of /proc/<pid>/maps.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace flamebpf::symbolize {

struct Mapping {
  uint64_t start = 0;
  uint64_t end = 0;    // exclusive
  uint64_t offset = 0; // file offset mapped at start
  bool executable = false;
  uint32_t device_major = 0;
  uint32_t device_minor = 0;
  uint64_t inode = 0;
  std::string path; // file path as the process sees it, "[vdso]", or empty for anonymous memory

  // Whether a regular file backs the mapping.
  bool file_backed() const { return inode != 0 && !path.empty() && path.front() == '/'; }
};

// Parses maps text; malformed lines are skipped. " (deleted)" stays part of the path.
std::vector<Mapping> parse_proc_maps(std::string_view text);

// What a process's mapped files say about it as a JVM.
struct JvmTraits {
  bool hotspot = false;        // libjvm.so is mapped, and OpenJ9's VM is not
  bool keeps_perf_map = false; // an agent that keeps /tmp/perf-<pid>.map current is loaded
};
JvmTraits jvm_traits(const std::vector<Mapping>& mappings);

} // namespace flamebpf::symbolize
