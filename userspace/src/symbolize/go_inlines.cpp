#include "symbolize/go_inlines.h"

#include <algorithm>
#include <string>
#include <unordered_set>

#include "runtimes/go/pclntab.h"

namespace flamebpf::symbolize {

Result<std::unique_ptr<InlineIndex>> build_go_inline_index(const ElfReader& reader,
                                                           std::vector<std::string>& problems)
{
  auto table = go::Pclntab::open(reader);
  if (!table)
    return fail(table.error());
  if (!*table)
    return fail(error(reader.shown() + " is no Go binary"));
  std::vector<InlineIndex::CallRange> calls;
  std::unordered_set<std::string> names; // each once; the ranges view them
  std::vector<go::PcValueRun> runs;
  std::vector<go::Pclntab::InlinedCall> tree;
  std::vector<uint32_t> call_numbers;
  std::vector<int32_t> chain;
  uint32_t next_call = 1;
  bool cut = false;
  for (size_t i = 0; i < (*table)->size() && !cut; ++i) {
    if (!(*table)->inline_tree(i, runs, tree))
      continue;
    // Each entry of a function's tree is one call, whatever runs of pcs it spans.
    call_numbers.assign(tree.size(), 0);
    for (const auto& run : runs) {
      chain.clear();
      for (int32_t call = run.value; call >= 0 && static_cast<size_t>(call) < tree.size() &&
                                     chain.size() < go::kMaxGoInlineDepth;
           call = tree[static_cast<size_t>(call)].parent)
        chain.push_back(call);
      // Outermost first: depth 1 is the call inlined into the function itself.
      std::reverse(chain.begin(), chain.end());
      uint32_t caller = 0;
      for (size_t depth = 0; depth < chain.size(); ++depth) {
        auto entry = static_cast<size_t>(chain[depth]);
        if (call_numbers[entry] == 0)
          call_numbers[entry] = next_call++;
        std::string_view name = *names.insert(tree[entry].name).first;
        calls.push_back({run.begin, run.end, static_cast<uint32_t>(depth + 1), call_numbers[entry],
                         caller, name});
        caller = call_numbers[entry];
      }
      if (calls.size() >= kMaxGoInlineRanges) {
        problems.push_back("more than " + std::to_string(kMaxGoInlineRanges) +
                           " inlined call ranges in " + reader.shown() + ": the rest not read");
        cut = true;
        break;
      }
    }
  }
  if ((*table)->malformed() > 0)
    problems.push_back(std::to_string((*table)->malformed()) + " malformed function records in " +
                       reader.shown() + "'s pclntab");
  return InlineIndex::assemble(std::move(calls));
}

} // namespace flamebpf::symbolize
