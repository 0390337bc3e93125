// The call tree a flame graph draws: one node per distinct path of frames from the root "all",
// with the samples of every stack through it. Built in time linear in the input, straight from
// folded text without a copy per frame; a tree can hold two profiles at once (before and after)
// for differential flame graphs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/file_content.h"
#include "profile/symbolized_profile.h"

namespace flamebpf::emit {

// Which of a tree's two profiles a count belongs to; a plain flame graph uses only kAfter.
enum Side : int { kAfter = 0, kBefore = 1 };

inline constexpr uint32_t kNoNode = UINT32_MAX;

// The fewest samples a frame needs to be share of total wide (at least 1).
uint64_t samples_for_share(uint64_t total, double share);

struct FlameNode {
  std::string_view name; // into the tree's name storage
  profile::FrameKind kind = profile::FrameKind::kNative;
  uint32_t depth = 0;             // the root is 0
  uint32_t parent = 0;            // the root is its own parent
  uint32_t first_child = kNoNode; // children form a list, in order of first appearance
  uint32_t last_child = kNoNode;
  uint32_t next_sibling = kNoNode;
  uint32_t child_count = 0;
  uint64_t samples[2] = {0, 0}; // [kAfter] and [kBefore]: samples of stacks through the node
};

// One frame of a path added to the tree.
struct PathFrame {
  std::string_view name;
  profile::FrameKind kind = profile::FrameKind::kNative;
  friend bool operator==(const PathFrame&, const PathFrame&) = default;
};

class FlameTree {
public:
  FlameTree();
  FlameTree(FlameTree&&) noexcept;
  FlameTree& operator=(FlameTree&&) noexcept;
  ~FlameTree();

  // Adds count samples of the stack path (root first) to side; the tree copies the names it
  // keeps. Consecutive paths that share a prefix (sorted folded files, most profiles) reuse it
  // without any lookup.
  void add(const std::vector<PathFrame>& path, uint64_t count, Side side = kAfter);

  // Every stack of profile, under its target name first when target_frame is set, then its
  // process name (as folded output writes them).
  void add_profile(const profile::SymbolizedProfile& profile,
                   bool target_frame = false,
                   Side side = kAfter);

  // Every line of folded text ("frame;frame;… count"); frame kinds from their suffixes ("_[k]",
  // "_[j]", "_[i]"). The tree keeps the text, and its nodes name frames in place. Into an empty
  // tree, subtrees with fewer samples than prune_share of the total are left out as they
  // complete (their samples stay in their parents): what a drawing would drop anyway is never
  // held in memory. Returns the number of lines skipped as malformed.
  uint64_t add_folded(FileContent text, Side side = kAfter, double prune_share = 0);

  // Makes room for this many nodes at once.
  void reserve(size_t nodes);

  const std::vector<FlameNode>& nodes() const { return nodes_; }
  const FlameNode& root() const { return nodes_[0]; }
  uint64_t total(Side side = kAfter) const { return nodes_[0].samples[side]; }

  // Multiplies every before count by factor (rounded), so that profiles of different total
  // samples compare by share (--normalize).
  void scale_before(double factor);

private:
  // Where a new node's name lives: copied into the tree's name storage, or in place in a folded
  // text the tree keeps.
  enum class Names { kCopied, kInKeptText };

  // add(), with new nodes' names stored as names says.
  void add_path(const std::vector<PathFrame>& path, uint64_t count, Side side, Names names);
  uint32_t child(uint32_t parent, const PathFrame& frame, Names names);
  // Removes node, the parent's latest child, with its subtree, the last nodes of the table.
  void drop_latest(uint32_t node, uint32_t previous_sibling);
  // Adds sorted stacks (line(i) for i below count_of_lines) to an empty tree; see add_folded.
  void add_sorted(size_t count_of_lines,
                  const std::function<std::pair<std::string_view, uint64_t>(size_t)>& line,
                  Side side,
                  uint64_t prune_below);
  uint32_t new_child(uint32_t parent, const PathFrame& frame, Names names);
  std::string_view keep(std::string_view name);

  std::vector<FlameNode> nodes_;
  // Name storage: blocks that never move, so that node names can point into them.
  std::vector<std::unique_ptr<char[]>> blocks_;
  size_t block_used_ = 0;
  size_t block_size_ = 0;
  // Children lookup for nodes with many children; a few are scanned.
  struct WideKey {
    std::string_view name;
    profile::FrameKind kind;
    friend bool operator==(const WideKey&, const WideKey&) = default;
  };
  struct WideKeyHash {
    size_t operator()(const WideKey& key) const
    {
      return std::hash<std::string_view>()(key.name) ^ static_cast<size_t>(key.kind);
    }
  };
  std::unordered_map<uint32_t, std::unordered_map<WideKey, uint32_t, WideKeyHash>> wide_;
  // The previous path's frames and nodes, for prefix reuse.
  std::vector<PathFrame> last_path_;
  std::vector<uint32_t> last_nodes_;
  std::vector<PathFrame> scratch_;
  // Folded texts the tree keeps, so that names can point into them; never moved, since a short
  // string's characters move with it.
  std::vector<std::unique_ptr<FileContent>> texts_;
};

} // namespace flamebpf::emit
