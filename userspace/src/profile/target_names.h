// Which target each sample belongs to, by name: plain data handed to the symbolize stage.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

namespace flamebpf::profile {

struct TargetNames {
  std::unordered_map<uint64_t, std::string> by_cgroup; // target cgroup id -> name
  std::unordered_map<uint32_t, std::string> by_pid;    // --pid target (host pid) -> name
  std::string unmatched = "host"; // samples of no target: the host outside every container
};

} // namespace flamebpf::profile
