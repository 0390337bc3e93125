#include "dumps/retention.h"

namespace flamebpf::dumps {

std::vector<Dump>
expired_dumps(const std::vector<Dump>& dumps, const RetentionPolicy& policy, Clock::time_point now)
{
  std::vector<Dump> expired;
  if (dumps.size() <= 1)
    return expired;
  uint64_t bytes = 0;
  for (const auto& dump : dumps)
    bytes += dump.bytes;
  uint64_t count = dumps.size();
  // The newest stays whatever the policy: a directory never ends up empty.
  for (size_t i = 0; i + 1 < dumps.size(); ++i) {
    const Dump& dump = dumps[i];
    bool too_old = policy.max_age && now - dump.window.end > *policy.max_age;
    bool too_many = policy.max_count && count > *policy.max_count;
    bool too_big = policy.max_bytes && bytes > *policy.max_bytes;
    if (!too_old && !too_many && !too_big)
      break;
    expired.push_back(dump);
    bytes -= dump.bytes;
    --count;
  }
  return expired;
}

} // namespace flamebpf::dumps
