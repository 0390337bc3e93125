// Which old dumps to remove so that a target's directory keeps within --retain-age,
// --retain-count and --retain-size; oldest first.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "dumps/dump_files.h"

namespace flamebpf::dumps {

struct RetentionPolicy {
  std::optional<std::chrono::seconds> max_age; // by the end of each dump's window
  std::optional<uint64_t> max_count;           // dumps (intervals) kept
  std::optional<uint64_t> max_bytes;           // all files of the kept dumps
};

// The dumps (of dumps, sorted oldest first) to remove at now: too old ones, then the oldest
// until both the count and the size fit. The newest dump is always kept.
std::vector<Dump>
expired_dumps(const std::vector<Dump>& dumps, const RetentionPolicy& policy, Clock::time_point now);

} // namespace flamebpf::dumps
