// Turns an interval's event counters into the warnings users act on, and the total the
// statistics report.
#pragma once

#include <string>
#include <vector>

#include "profile/drop_counters.h"

namespace flamebpf::profile {

// One line per kind of loss that happened, each naming the option that avoids it; empty when
// nothing was lost.
std::vector<std::string> describe_drops(const DropCounters& counters);

// Samples lost or degraded in total (stacks lost, counts lost).
uint64_t total_drops(const DropCounters& counters);

} // namespace flamebpf::profile
