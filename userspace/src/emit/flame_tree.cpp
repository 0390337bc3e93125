#include "emit/flame_tree.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <sys/mman.h>

#include "profile/folded_reader.h"

namespace flamebpf::emit {
namespace {

// Big tables are touched once per new node: huge pages spare a page fault per 4 KiB.
void advise_huge_pages(void* data, size_t bytes)
{
  constexpr uintptr_t kHuge = 2 << 20;
  auto start = (reinterpret_cast<uintptr_t>(data) + kHuge - 1) & ~(kHuge - 1);
  auto end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(kHuge - 1);
  if (end > start)
    ::madvise(reinterpret_cast<void*>(start), end - start, MADV_HUGEPAGE);
}

// Children beyond this many get a hash lookup; fewer are scanned (most nodes have one or two).
constexpr uint32_t kScanLimit = 16;
constexpr size_t kBlockSize = 16 << 20;

} // namespace

FlameTree::FlameTree()
{
  FlameNode root;
  root.name = "all";
  nodes_.push_back(root);
}

FlameTree::FlameTree(FlameTree&&) noexcept = default;
FlameTree& FlameTree::operator=(FlameTree&&) noexcept = default;
FlameTree::~FlameTree() = default;

std::string_view FlameTree::keep(std::string_view name)
{
  if (block_used_ + name.size() > block_size_) {
    block_size_ = std::max(kBlockSize, name.size());
    blocks_.push_back(std::unique_ptr<char[]>(new char[block_size_]));
    advise_huge_pages(blocks_.back().get(), block_size_);
    block_used_ = 0;
  }
  char* stored = blocks_.back().get() + block_used_;
  std::memcpy(stored, name.data(), name.size());
  block_used_ += name.size();
  return {stored, name.size()};
}

uint32_t FlameTree::child(uint32_t parent, const PathFrame& frame)
{
  const FlameNode& up = nodes_[parent];
  if (up.first_child == kNoNode || sorted_into_empty_)
    return new_child(parent, frame);
  // The latest child is the likeliest: stacks that share a prefix tend to come together.
  if (const FlameNode& last = nodes_[up.last_child];
      last.kind == frame.kind && last.name == frame.name)
    return up.last_child;
  if (up.child_count <= kScanLimit) {
    for (uint32_t index = up.first_child; index != kNoNode; index = nodes_[index].next_sibling) {
      if (nodes_[index].kind == frame.kind && nodes_[index].name == frame.name)
        return index;
    }
    return new_child(parent, frame);
  }
  auto& lookup = wide_[parent];
  if (lookup.empty()) {
    for (uint32_t index = up.first_child; index != kNoNode; index = nodes_[index].next_sibling)
      lookup.emplace(WideKey{nodes_[index].name, nodes_[index].kind}, index);
  }
  if (auto it = lookup.find(WideKey{frame.name, frame.kind}); it != lookup.end())
    return it->second;
  return new_child(parent, frame);
}

uint32_t FlameTree::new_child(uint32_t parent, const PathFrame& frame)
{
  auto index = static_cast<uint32_t>(nodes_.size());
  FlameNode node;
  node.name = names_kept_ ? keep(frame.name) : frame.name;
  node.kind = frame.kind;
  node.depth = nodes_[parent].depth + 1;
  node.parent = parent;
  nodes_.push_back(node);
  FlameNode& owner = nodes_[parent];
  if (owner.last_child == kNoNode)
    owner.first_child = index;
  else
    nodes_[owner.last_child].next_sibling = index;
  owner.last_child = index;
  ++owner.child_count;
  if (auto it = wide_.find(parent); it != wide_.end())
    it->second.emplace(WideKey{nodes_[index].name, frame.kind}, index);
  return index;
}

void FlameTree::drop_latest(uint32_t node, uint32_t previous_sibling)
{
  FlameNode& parent = nodes_[nodes_[node].parent];
  parent.last_child = previous_sibling;
  if (previous_sibling == kNoNode)
    parent.first_child = kNoNode;
  else
    nodes_[previous_sibling].next_sibling = kNoNode;
  --parent.child_count;
  nodes_.resize(node);
}

void FlameTree::leave_path(size_t keep, Side side)
{
  // The previous path's nodes below the kept prefix are complete: no later sorted path comes
  // back to them. The deepest go first, so each is the latest subtree of the table.
  if (prune_below_ > 0) {
    for (size_t i = last_nodes_.size(); i-- > keep;) {
      if (nodes_[last_nodes_[i]].samples[side] < prune_below_)
        drop_latest(last_nodes_[i], last_previous_[i]);
    }
  }
  last_nodes_.resize(keep);
  last_path_.resize(keep);
  last_previous_.resize(keep);
}

void FlameTree::add(const std::vector<PathFrame>& path, uint64_t count, Side side)
{
  if (count == 0)
    return;
  size_t shared = 0;
  while (shared < path.size() && shared < last_path_.size() && path[shared] == last_path_[shared])
    ++shared;
  leave_path(shared, side);
  nodes_[0].samples[side] += count;
  for (size_t i = 0; i < shared; ++i)
    nodes_[last_nodes_[i]].samples[side] += count;
  uint32_t parent = shared == 0 ? 0 : last_nodes_[shared - 1];
  for (size_t i = shared; i < path.size(); ++i) {
    uint32_t previous = nodes_[parent].last_child;
    parent = child(parent, path[i]);
    nodes_[parent].samples[side] += count;
    last_nodes_.push_back(parent);
    last_previous_.push_back(parent == previous ? kNoNode : previous);
    // The node's own name: the caller's may not outlive this call.
    last_path_.push_back({nodes_[parent].name, path[i].kind});
  }
}

void FlameTree::add_profile(const profile::SymbolizedProfile& profile, bool target_frame, Side side)
{
  auto or_unknown = [](const std::string& name) -> std::string_view {
    return name.empty() ? std::string_view("[unknown]") : std::string_view(name);
  };
  std::vector<PathFrame>& path = scratch_;
  for (const auto& stack : profile.stacks) {
    path.clear();
    if (target_frame)
      path.push_back({or_unknown(stack.target), profile::FrameKind::kNative});
    path.push_back({or_unknown(stack.comm), profile::FrameKind::kNative});
    for (const auto& frame : stack.frames)
      path.push_back({frame.name, frame.kind});
    add(path, stack.count, side);
  }
}

void FlameTree::reserve(size_t nodes)
{
  if (nodes <= nodes_.capacity())
    return;
  nodes_.reserve(nodes);
  advise_huge_pages(nodes_.data(), nodes * sizeof(FlameNode));
}

uint64_t samples_for_share(uint64_t total, double share)
{
  return std::max<uint64_t>(
      1, static_cast<uint64_t>(std::ceil(static_cast<double>(total) * std::max(share, 0.0))));
}

uint64_t FlameTree::add_folded(FileContent text, Side side, double prune_share)
{
  texts_.push_back(std::make_unique<FileContent>(std::move(text)));
  std::string_view rest = texts_.back()->view();
  // Each line's stack and count; sorted by stack, so that stacks sharing a prefix come together
  // and most frames need no lookup (folded files are usually sorted already).
  struct Line {
    std::string_view stack;
    uint64_t count;
  };
  std::vector<Line> lines;
  uint64_t bad = 0;
  while (!rest.empty()) {
    size_t newline = rest.find('\n');
    std::string_view line = rest.substr(0, newline);
    rest.remove_prefix(newline == std::string_view::npos ? rest.size() : newline + 1);
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    if (line.empty())
      continue;
    size_t space = line.rfind(' ');
    uint64_t count = 0;
    if (space == std::string_view::npos || space == 0 || space + 1 == line.size()) {
      ++bad;
      continue;
    }
    auto [end, ec] = std::from_chars(line.data() + space + 1, line.data() + line.size(), count);
    if (ec != std::errc() || end != line.data() + line.size()) {
      ++bad;
      continue;
    }
    lines.push_back({line.substr(0, space), count});
  }
  auto by_stack = [](const Line& a, const Line& b) { return a.stack < b.stack; };
  if (!std::is_sorted(lines.begin(), lines.end(), by_stack))
    std::sort(lines.begin(), lines.end(), by_stack);

  // A frame's text is unique to its name and kind, and stacks with a common prefix are
  // contiguous once sorted: into an empty tree, a frame differing from the previous stack's is
  // always a new node.
  sorted_into_empty_ = nodes_.size() == 1;
  names_kept_ = false;
  leave_path(0, side);
  if (sorted_into_empty_ && prune_share > 0) {
    uint64_t total = 0;
    for (const Line& line : lines)
      total += line.count;
    prune_below_ = samples_for_share(total, prune_share);
  } else {
    reserve(nodes_.size() + texts_.back()->view().size() / 32);
  }
  std::vector<PathFrame>& path = scratch_;
  for (const Line& line : lines) {
    std::string_view frames = line.stack;
    path.clear();
    bool first = true;
    for (;;) {
      size_t semicolon = frames.find(';');
      std::string_view name = frames.substr(0, semicolon);
      // The first frame is the process: its name carries no kind.
      profile::FrameKind kind =
          first ? profile::FrameKind::kNative : profile::folded_frame_kind(name);
      path.push_back({name, kind});
      first = false;
      if (semicolon == std::string_view::npos)
        break;
      frames.remove_prefix(semicolon + 1);
    }
    add(path, line.count, side);
  }
  // The last stack's nodes are complete too.
  leave_path(0, side);
  sorted_into_empty_ = false;
  names_kept_ = true;
  prune_below_ = 0;
  return bad;
}

void FlameTree::scale_before(double factor)
{
  for (auto& node : nodes_)
    node.samples[kBefore] =
        static_cast<uint64_t>(std::llround(static_cast<double>(node.samples[kBefore]) * factor));
}

} // namespace flamebpf::emit
