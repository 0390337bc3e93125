#include "emit/diff_folded.h"

#include <cmath>
#include <map>

#include "emit/folded.h"

namespace flamebpf::emit {

double normalization_factor(uint64_t before_total, uint64_t after_total)
{
  if (before_total == 0 || after_total == 0)
    return 1;
  return static_cast<double>(after_total) / static_cast<double>(before_total);
}

Result<> write_diff_folded(const profile::SymbolizedProfile& before,
                           const profile::SymbolizedProfile& after,
                           bool normalize,
                           std::ostream& out)
{
  std::map<std::string, std::pair<uint64_t, uint64_t>> lines;
  for (const auto& stack : before.stacks)
    lines[folded_stack(stack)].first += stack.count;
  for (const auto& stack : after.stacks)
    lines[folded_stack(stack)].second += stack.count;
  double factor =
      normalize ? normalization_factor(before.total_samples(), after.total_samples()) : 1;
  for (const auto& [line, counts] : lines) {
    auto scaled = static_cast<uint64_t>(std::llround(static_cast<double>(counts.first) * factor));
    out << line << ' ' << scaled << ' ' << counts.second << '\n';
  }
  out.flush();
  if (!out)
    return fail(error("write failed"));
  return {};
}

} // namespace flamebpf::emit
