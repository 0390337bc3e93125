#include "symbolize/go_inlines.h"

#include <algorithm>
#include <fcntl.h>
#include <functional>
#include <sys/stat.h>

#include "common/log.h"

namespace flamebpf::symbolize {

std::unique_ptr<GoInlineTree>
GoInlineTree::open(int fd, const std::string& shown, std::vector<std::string>& problems)
{
  auto table = std::make_shared<Table>();
  table->fd = UniqueFd(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  struct stat status {};
  if (!table->fd.valid() || ::fstat(table->fd.get(), &status) != 0)
    return nullptr;
  auto reader = ElfReader::open(
      ElfBytes::file(table->fd.get(), static_cast<uint64_t>(status.st_size)), shown);
  if (!reader)
    return nullptr;
  table->reader = std::make_unique<ElfReader>(std::move(*reader));
  auto pclntab = go::Pclntab::open(*table->reader);
  if (!pclntab) {
    problems.push_back(pclntab.error().message);
    return nullptr;
  }
  if (!*pclntab)
    return nullptr;
  table->pclntab.emplace(std::move(**pclntab));
  table->pclntab->release_windows();
  std::unique_ptr<GoInlineTree> tree(new GoInlineTree(table));
  tree->functions_held_ = table->pclntab->memory_bytes();
  return tree;
}

std::vector<InlineIndex::Inlined> GoInlineTree::at(uint64_t address, StallGuard* guard) const
{
  std::optional<size_t> function;
  {
    // The function table is never read again: looking in it takes no file read.
    std::unique_lock lock(table_->mutex, std::try_to_lock);
    if (!lock.owns_lock())
      return {}; // a stalled read holds the table
    function = table_->pclntab->find(address);
  }
  if (!function)
    return {};
  auto found = functions_.find(*function);
  if (found == functions_.end()) {
    std::function<std::optional<FunctionTree>()> read = [table = table_, index = *function] {
      std::lock_guard lock(table->mutex);
      FunctionTree tree;
      if (!table->pclntab->inline_tree(index, tree.runs, tree.calls)) {
        tree.runs.clear();
        tree.calls.clear();
      }
      // The windows are read again for the next function: most are read once.
      table->pclntab->release_windows();
      return std::optional<FunctionTree>(std::move(tree));
    };
    auto tree = tree_reads_.run(guard, std::move(read), [&](std::chrono::milliseconds limit) {
      spdlog::warn("{}: a read of its inlined calls got no answer within {} ms (its file system "
                   "stalls); they stay unnamed until it answers",
                   table_->reader->shown(), limit.count());
    });
    if (!tree)
      return {};
    if (tree_bytes_ > kMaxGoInlineTreeBytes) {
      functions_.clear();
      tree_bytes_ = 0;
    }
    for (const auto& call : tree->calls)
      tree_bytes_ += sizeof call + call.name.capacity();
    tree_bytes_ +=
        tree->runs.capacity() * sizeof(go::PcValueRun) + sizeof(FunctionTree) + sizeof(size_t) * 2;
    found = functions_.emplace(*function, std::move(*tree)).first;
  }
  const FunctionTree& tree = found->second;
  auto after =
      std::upper_bound(tree.runs.begin(), tree.runs.end(), address,
                       [](uint64_t value, const go::PcValueRun& run) { return value < run.begin; });
  if (after == tree.runs.begin())
    return {};
  const go::PcValueRun& run = *std::prev(after);
  if (address >= run.end)
    return {};
  std::vector<InlineIndex::Inlined> chain;
  for (int32_t call = run.value; call >= 0 && static_cast<size_t>(call) < tree.calls.size() &&
                                 chain.size() < go::kMaxGoInlineDepth;
       call = tree.calls[static_cast<size_t>(call)].parent)
    chain.push_back({tree.calls[static_cast<size_t>(call)].name, false});
  // Outermost first: the first is the call inlined into the function itself.
  std::reverse(chain.begin(), chain.end());
  return chain;
}

size_t GoInlineTree::memory_bytes() const
{
  return sizeof *this + functions_held_ + tree_bytes_;
}

} // namespace flamebpf::symbolize
