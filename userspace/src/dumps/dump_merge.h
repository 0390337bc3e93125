// The sum of one target's dumps over a range of time: what `flamebpf merge` writes, and what
// --listen serves for a range.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/result.h"
#include "dumps/dump_files.h"
#include "profile/symbolized_profile.h"

namespace flamebpf::dumps {

struct MergedDumps {
  profile::SymbolizedProfile profile; // its stacks' target: the directory's name
  size_t dumps = 0;                   // folded dumps summed
  Window span;                        // from the first one's start to the last one's end
};

// Sums the folded dumps in directory whose windows lie wholly within from and to (either may be
// open), one file at a time, equal stacks merged. Fails (EFBIG, a usage error) if their files hold
// more than max_bytes, which is known before any is read, or once the distinct stacks summed take
// more than max_held_bytes in memory; as a usage error if no dump lies within the range.
[[nodiscard]] Result<MergedDumps> merge_dumps(const std::string& directory,
                                              std::optional<Clock::time_point> from,
                                              std::optional<Clock::time_point> to,
                                              uint64_t max_bytes = UINT64_MAX,
                                              uint64_t max_held_bytes = UINT64_MAX);

} // namespace flamebpf::dumps
