// The two-column folded form of a differential profile, as difffolded.pl writes it for other
// tools: "stack before after", one line per stack present in either profile, sorted.
#pragma once

#include <ostream>

#include "common/result.h"
#include "profile/symbolized_profile.h"

namespace flamebpf::emit {

// Writes before and after; with normalize, before's counts are scaled to after's total samples
// (rounded), so that profiles of different lengths compare by share.
[[nodiscard]] Result<> write_diff_folded(const profile::SymbolizedProfile& before,
                                         const profile::SymbolizedProfile& after,
                                         bool normalize,
                                         std::ostream& out);

// The factor that scales before's samples to after's total; 1 if either is empty.
double normalization_factor(uint64_t before_total, uint64_t after_total);

} // namespace flamebpf::emit
