// Parsing of /proc/<pid>/maps.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace flamebpf::procfs {

// One line of /proc/<pid>/maps.
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

// flamebpf's own vDSO, as mapped: the same image as every other 64-bit process's on this kernel,
// so read from here rather than from a target. Empty if it has none.
std::string_view own_vdso_image();

} // namespace flamebpf::procfs
