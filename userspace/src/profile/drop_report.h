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

// One line per way the table unwinder cut user stacks short (they are kept, with the frames found
// so far); empty when none was. Normal in small numbers (code whose tables do not match it, stack
// pages not resident), so for the debug log, not a warning.
std::vector<std::string> describe_cut_stacks(const DropCounters& counters);

// Samples lost or degraded in total (stacks lost, counts lost).
uint64_t total_drops(const DropCounters& counters);

} // namespace flamebpf::profile
