#include "profile/by_target.h"

namespace flamebpf::profile {

std::map<std::string, SymbolizedProfile> split_by_target(const SymbolizedProfile& profile)
{
  std::map<std::string, SymbolizedProfile> parts;
  for (const auto& stack : profile.stacks) {
    auto [it, inserted] = parts.try_emplace(stack.target);
    if (inserted) {
      it->second.start = profile.start;
      it->second.end = profile.end;
      it->second.frequency_hz = profile.frequency_hz;
      it->second.counters = profile.counters;
      it->second.build_ids = profile.build_ids;
    }
    it->second.stacks.push_back(stack);
  }
  return parts;
}

} // namespace flamebpf::profile
