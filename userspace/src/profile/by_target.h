// Splits a profile into one profile per target, for per-target outputs.
#pragma once

#include <map>
#include <string>

#include "profile/symbolized_profile.h"

namespace flamebpf::profile {

// Each target's stacks, keyed by target name; times, frequency and counters are copied to each.
std::map<std::string, SymbolizedProfile> split_by_target(const SymbolizedProfile& profile);

} // namespace flamebpf::profile
