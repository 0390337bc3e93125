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
// Name storage grows by doubling: a small profile (an agent's interval) takes a few KiB, a huge
// one (100k stacks) still gets big blocks. A fixed big block would also teach malloc to serve
// every later allocation below its size from the heap, where freed memory stays resident.
constexpr size_t kFirstBlockSize = 16 << 10;
constexpr size_t kLargestBlockSize = 16 << 20;

// Calls take(frame) for each frame of frames ("a;b;c": a folded stack, or the end of one), in
// order. A frame's kind comes from its suffix ("_[k]", "_[j]", "_[i]"), except the process's,
// the first frame when frames starts the stack, which has none.
template <class Take> void for_each_frame(std::string_view frames, bool starts_stack, Take&& take)
{
  for (bool first = starts_stack;; first = false) {
    size_t semicolon = frames.find(';');
    std::string_view name = frames.substr(0, semicolon);
    profile::FrameKind kind =
        first ? profile::FrameKind::kNative : profile::folded_frame_kind(name);
    take(PathFrame{name, kind});
    if (semicolon == std::string_view::npos)
      return;
    frames.remove_prefix(semicolon + 1);
  }
}

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
  if (name.empty())
    return {};
  if (block_used_ + name.size() > block_size_) {
    block_size_ =
        std::max(block_size_ == 0 ? kFirstBlockSize : std::min(block_size_ * 2, kLargestBlockSize),
                 name.size());
    blocks_.push_back(std::unique_ptr<char[]>(new char[block_size_]));
    advise_huge_pages(blocks_.back().get(), block_size_);
    block_used_ = 0;
  }
  char* stored = blocks_.back().get() + block_used_;
  std::memcpy(stored, name.data(), name.size());
  block_used_ += name.size();
  return {stored, name.size()};
}

uint32_t FlameTree::child(uint32_t parent, const PathFrame& frame, Names names)
{
  const FlameNode& up = nodes_[parent];
  if (up.first_child == kNoNode)
    return new_child(parent, frame, names);
  // The latest child is the likeliest: stacks that share a prefix tend to come together.
  if (const FlameNode& last = nodes_[up.last_child];
      last.kind == frame.kind && last.name == frame.name)
    return up.last_child;
  if (up.child_count <= kScanLimit) {
    for (uint32_t index = up.first_child; index != kNoNode; index = nodes_[index].next_sibling) {
      if (nodes_[index].kind == frame.kind && nodes_[index].name == frame.name)
        return index;
    }
    return new_child(parent, frame, names);
  }
  auto& lookup = wide_[parent];
  if (lookup.empty()) {
    for (uint32_t index = up.first_child; index != kNoNode; index = nodes_[index].next_sibling)
      lookup.emplace(WideKey{nodes_[index].name, nodes_[index].kind}, index);
  }
  if (auto it = lookup.find(WideKey{frame.name, frame.kind}); it != lookup.end())
    return it->second;
  return new_child(parent, frame, names);
}

uint32_t FlameTree::new_child(uint32_t parent, const PathFrame& frame, Names names)
{
  auto index = static_cast<uint32_t>(nodes_.size());
  FlameNode node;
  node.name = names == Names::kCopied ? keep(frame.name) : frame.name;
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

void FlameTree::add(const std::vector<PathFrame>& path, uint64_t count, Side side)
{
  // The caller's names may not outlive this call.
  add_path(path, count, side, Names::kCopied);
}

void FlameTree::add_path(const std::vector<PathFrame>& path, uint64_t count, Side side, Names names)
{
  if (count == 0)
    return;
  size_t shared = 0;
  while (shared < path.size() && shared < last_path_.size() && path[shared] == last_path_[shared])
    ++shared;
  last_nodes_.resize(shared);
  last_path_.resize(shared);
  nodes_[0].samples[side] += count;
  for (size_t i = 0; i < shared; ++i)
    nodes_[last_nodes_[i]].samples[side] += count;
  uint32_t parent = shared == 0 ? 0 : last_nodes_[shared - 1];
  for (size_t i = shared; i < path.size(); ++i) {
    parent = child(parent, path[i], names);
    nodes_[parent].samples[side] += count;
    last_nodes_.push_back(parent);
    // The node's own name, which lives as long as the tree.
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
  // (folded files are usually sorted already).
  using Line = profile::FoldedLine;
  std::vector<Line> lines;
  uint64_t total = 0;
  uint64_t bad = profile::for_each_folded_line(rest, [&](const Line& line) {
    if (line.count == 0)
      return;
    lines.push_back(line);
    total += line.count;
  });
  auto by_stack = [](const Line& a, const Line& b) { return a.stack < b.stack; };
  if (!std::is_sorted(lines.begin(), lines.end(), by_stack))
    std::sort(lines.begin(), lines.end(), by_stack);

  // The nodes name their frames in place in the kept text.
  if (nodes_.size() == 1) {
    add_sorted(
        lines.size(), [&](size_t i) { return std::pair(lines[i].stack, lines[i].count); }, side,
        prune_share > 0 ? samples_for_share(total, prune_share) : 0);
    return bad;
  }
  // Into a tree that holds stacks already, each frame is looked up.
  reserve(nodes_.size() + texts_.back()->view().size() / 32);
  std::vector<PathFrame>& path = scratch_;
  for (const Line& line : lines) {
    path.clear();
    for_each_frame(line.stack, true, [&](const PathFrame& frame) { path.push_back(frame); });
    add_path(path, line.count, side, Names::kInKeptText);
  }
  last_path_.clear();
  last_nodes_.clear();
  return bad;
}

void FlameTree::add_sorted(size_t count_of_lines,
                           const std::function<std::pair<std::string_view, uint64_t>(size_t)>& line,
                           Side side,
                           uint64_t prune_below)
{
  // Sorted stacks into an empty tree: stacks that share a frame prefix are contiguous, so a
  // frame after the prefix shared with the previous stack is always a new node, and a node is
  // complete once a stack leaves it. Samples are counted at the leaf and handed to the parent
  // when a node completes; a completed node with fewer than prune_below samples is dropped with
  // its subtree, the newest nodes of the table.
  std::vector<uint32_t> path_nodes;
  std::vector<uint32_t> path_previous;
  auto complete_below = [&](size_t keep) {
    for (size_t i = path_nodes.size(); i-- > keep;) {
      uint32_t node = path_nodes[i];
      nodes_[nodes_[node].parent].samples[side] += nodes_[node].samples[side];
      if (nodes_[node].samples[side] < prune_below)
        drop_latest(node, path_previous[i]);
    }
    path_nodes.resize(keep);
    path_previous.resize(keep);
  };
  std::string_view previous;
  for (size_t i = 0; i < count_of_lines; ++i) {
    auto [stack, count] = line(i);
    // The frames shared with the previous stack: those whose text and terminator match.
    size_t common = 0;
    size_t shared = 0;
    size_t frame_start = 0; // where the first frame not shared starts
    size_t limit = std::min(stack.size(), previous.size());
    while (common < limit && stack[common] == previous[common]) {
      if (stack[common] == ';') {
        ++shared;
        frame_start = common + 1;
      }
      ++common;
    }
    bool stack_ends = common == stack.size() || stack[common] == ';';
    bool previous_ends = common == previous.size() || previous[common] == ';';
    if (i > 0 && stack_ends && previous_ends && common > frame_start) {
      ++shared;
      frame_start = common + 1;
    }
    shared = std::min(shared, path_nodes.size());
    complete_below(shared);
    uint32_t parent = shared == 0 ? 0 : path_nodes.back();
    if (frame_start < stack.size()) {
      for_each_frame(stack.substr(frame_start), path_nodes.empty(), [&](const PathFrame& frame) {
        path_previous.push_back(nodes_[parent].last_child);
        parent = new_child(parent, frame, Names::kInKeptText);
        path_nodes.push_back(parent);
      });
    }
    nodes_[parent].samples[side] += count;
    previous = stack;
  }
  complete_below(0);
}

void FlameTree::scale_before(double factor)
{
  for (auto& node : nodes_)
    node.samples[kBefore] =
        static_cast<uint64_t>(std::llround(static_cast<double>(node.samples[kBefore]) * factor));
}

} // namespace flamebpf::emit
