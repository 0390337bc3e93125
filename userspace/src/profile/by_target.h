// Splits a profile into one profile per target, for per-target outputs, and names each target's
// file or directory.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "profile/symbolized_profile.h"

namespace flamebpf::profile {

// Each target's stacks, keyed by target name; times, frequency and counters are copied to each.
std::map<std::string, SymbolizedProfile> split_by_target(const SymbolizedProfile& profile);

// Where each target's stacks are in profile, by target name, in profile's order: a split that
// copies nothing yet, so a writer can copy one target's part at a time (target_part).
std::map<std::string, std::vector<size_t>> stacks_by_target(const SymbolizedProfile& profile);

// The part of profile that target's stacks (at indexes, from stacks_by_target) make, as
// split_by_target makes it.
SymbolizedProfile target_part(const SymbolizedProfile& profile,
                              const std::string& target,
                              const std::vector<size_t>& indexes);

// The longest target file name kept as it is; longer names are cut and marked.
inline constexpr size_t kMaxTargetFileName = 120;

// A target's name as a file or directory name: letters, digits, '.', '_' and '-' only, never
// starting with '.', so it cannot leave its directory, hide or be "." or "..". A name that
// already is such a name is kept. Any other is spelled with '_' for each other byte (cut at
// kMaxTargetFileName) and marked with a hash of the whole name, "_" and 8 hex digits: "a/b"
// becomes "a_b_" + hash, never "a_b", which is the target "a_b"'s. A name that looks marked
// already is marked too, so no name can take another's. The same target gets the same name in
// every interval and every run.
std::string target_file_name(std::string_view target);

// target_file_name of each of targets, by target. Two names that still meet (a crafted hash
// collision) are told apart by the hash of a counter: the first in sorted order keeps its name,
// so the result depends only on the set.
std::map<std::string, std::string> target_file_names(const std::set<std::string>& targets);

} // namespace flamebpf::profile
