// Turns an interval's event counters into the warnings users act on.
#pragma once

#include <string>
#include <vector>

#include "profile/raw_profile.h"

namespace flamebpf::drain {

// One line per kind of loss that happened, each naming the option that avoids it; empty when
// nothing was lost.
std::vector<std::string> describe_drops(const profile::DropCounters& counters);

// Samples lost or degraded in total (stacks lost, counts lost).
uint64_t total_drops(const profile::DropCounters& counters);

} // namespace flamebpf::drain
