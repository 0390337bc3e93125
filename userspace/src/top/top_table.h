// What `flamebpf top` shows, apart from the terminal: each interval's stacks in compact form
// (functions as numbers), the hottest functions by self and total samples over the last interval,
// a decaying average or the whole run, and the callers and callees of one function. The terminal
// view (top/top_screen.h) and the plain-text snapshots of --batch both draw from it.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <regex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "profile/symbolized_profile.h"

namespace flamebpf::top {

// Function names, each a number: the same name and kind has the same number for the whole run.
class FunctionNames {
public:
  struct Name {
    std::string text;
    profile::FrameKind kind = profile::FrameKind::kUnknown;
  };
  uint32_t intern(std::string_view text, profile::FrameKind kind);
  const Name& operator[](uint32_t id) const { return names_[id]; }
  size_t size() const { return names_.size(); }

private:
  // Open addressing: each interval looks up every frame of every stack, so a probe is one load of
  // a slot and, on a match of the stored hash, one comparison of the text.
  void grow();
  std::vector<Name> names_;
  std::vector<uint64_t> hashes_; // of each name, by number
  std::vector<uint32_t> slots_;  // number + 1; 0 is empty; a power of two long
};
// One stack of an interval: its target and process name, its frames root first, its samples.
struct CompactStack {
  uint32_t target = 0; // index into TopInterval::targets
  uint32_t comm = 0;   // a FunctionNames number
  uint32_t first = 0;  // its frames: TopInterval::frames from first, size of them
  uint32_t size = 0;
  uint64_t count = 0;
};

struct TopTarget {
  std::string name; // "host" for samples outside every target
  uint64_t samples = 0;
};

// One interval of the recording as top sees it.
struct TopInterval {
  std::chrono::system_clock::time_point end;
  double seconds = 0;     // its length
  uint32_t frequency = 0; // samples per second per CPU
  std::vector<TopTarget> targets;
  std::vector<CompactStack> stacks;
  std::vector<uint32_t> frames; // every stack's, one after the other: one allocation, not one each
  uint64_t drops = 0;           // samples lost in the kernel
  double own_cpu_percent = 0;   // flamebpf's own CPU over the interval, 100 = one CPU
  // How the targets' samples cover their CPU time (profile::coverage_summary); empty if unknown.
  std::string coverage;

  std::span<const uint32_t> frames_of(const CompactStack& stack) const
  {
    return {frames.data() + stack.first, stack.size};
  }
};

// Converts an interval's profile, interning its names.
TopInterval compact_interval(const profile::SymbolizedProfile& profile, FunctionNames& names);

// Samples of one function: where it was the leaf (self), and in the stack at all (total; once per
// stack however often it recurs).
struct FunctionSamples {
  double self = 0;
  double total = 0;
};

// The samples of each target's functions, sorted by key, (target << 32) | function: windows
// combine by one pass over two tables, and one target's functions are one range.
struct FunctionEntry {
  uint64_t key = 0;
  FunctionSamples samples;
};
using FunctionTable = std::vector<FunctionEntry>;

enum class TopWindow { kInterval, kDecaying, kSinceStart };
enum class TopOrder { kSelf, kTotal };

// One row of the view: a function's samples over the window, and its shares of all samples shown.
struct TopRow {
  uint32_t function = 0;
  double self = 0;
  double total = 0;
  double self_share = 0; // 0 to 1
  double total_share = 0;
};

// The state of the run top keeps: targets by name (a target keeps its number), the stacks since
// the start, and the three windows' function tables.
class TopModel {
public:
  // Half-life of the decaying average, in intervals.
  static constexpr double kHalfLifeIntervals = 5;

  void add(TopInterval interval);
  // A target that stopped: shown as such until it starts again.
  void target_stopped(const std::string& name);
  void target_started(const std::string& name);

  struct TargetRow {
    std::string name;
    double samples_per_second = 0; // over the last interval
    double cpu_percent = 0;        // of one CPU, over the last interval
    bool stopped = false;
  };
  std::vector<TargetRow> targets() const;

  // The functions of target (empty: all), sorted, kept to those whose name matches filter.
  std::vector<TopRow> rows(TopWindow window,
                           TopOrder order,
                           const std::string& target,
                           const std::optional<std::regex>& filter) const;
  // Samples shown in the window for target (empty: all).
  double samples(TopWindow window, const std::string& target) const;

  // The callers (paths from the root) and callees (paths to the leaves) of function, as trees
  // of shares of its total samples, over the stacks of the window: the last interval's, or every
  // stack since the start for the other windows.
  struct TreeLine {
    int depth = 0; // 0 is the function itself
    uint32_t function = 0;
    double share = 0; // of the function's total samples
  };
  // At most this many distinct stacks are kept since the start (for the trees and the saved
  // profile of the whole run); later new ones count in the function tables only.
  static constexpr size_t kMaxStacksKept = 500000;
  bool stacks_capped() const { return stacks_capped_; }

  struct Tree {
    std::vector<TreeLine> callers; // each path from the function towards the root
    std::vector<TreeLine> callees; // each path from the function towards the leaves
  };
  Tree tree(uint32_t function, TopWindow window, const std::string& target, size_t max_lines) const;

  // The stacks behind the window as a profile (the decaying average saves the whole run).
  profile::SymbolizedProfile profile(TopWindow window, const std::string& target) const;

  const FunctionNames& names() const { return names_; }
  FunctionNames& names() { return names_; }
  const std::optional<TopInterval>& last() const { return last_; }
  uint64_t intervals() const { return intervals_; }

private:
  // A stack of a window, wherever it is kept.
  struct StackRef {
    uint32_t target;
    uint32_t comm;
    std::span<const uint32_t> frames;
    uint64_t count;
  };
  // Every distinct stack since the start (up to kMaxStacksKept), with its samples.
  class StackPool {
  public:
    // Adds count samples to the stack, kept if new and there is room; false if there was none.
    bool add(uint32_t target, uint32_t comm, std::span<const uint32_t> frames, uint64_t count);
    size_t size() const { return stacks_.size(); }
    StackRef operator[](size_t index) const
    {
      const Kept& kept = stacks_[index];
      return {kept.target, kept.comm, {frames_.data() + kept.first, kept.size}, kept.count};
    }

  private:
    struct Kept {
      uint32_t target;
      uint32_t comm;
      size_t first;
      uint32_t size;
      uint64_t count;
      uint64_t hash;
    };
    void grow();
    std::vector<Kept> stacks_;
    std::vector<uint32_t> frames_;
    std::vector<uint32_t> slots_; // index + 1; 0 is empty; a power of two long
  };
  // Per function while one interval's table is made: reused, so that an interval costs one pass
  // over its frames and no allocation per function.
  struct Scratch {
    std::vector<double> self;
    std::vector<double> total;
    std::vector<uint32_t> last_stack; // the stack that last added to total: recursion adds once
    std::vector<uint32_t> touched;
    uint32_t stack_serial = 0;
  };
  FunctionTable function_table(const TopInterval& interval);
  uint32_t target_id(const std::string& name);
  const FunctionTable& table(TopWindow window) const;
  std::vector<StackRef> stacks_of(TopWindow window, const std::string& target) const;
  std::optional<uint32_t> find_target(const std::string& name) const;

  FunctionNames names_;
  std::vector<std::string> target_names_;
  std::vector<bool> stopped_;
  std::optional<TopInterval> last_; // its targets renumbered to this model's
  FunctionTable last_table_;
  FunctionTable decaying_;
  FunctionTable since_start_;
  StackPool all_stacks_;
  Scratch scratch_;
  bool stacks_capped_ = false;
  uint64_t intervals_ = 0;
};

// A name as it may go to a terminal: valid UTF-8 (or ASCII when ascii_only) with every control
// character, escape included, shown as '?', cut to at most columns display columns (an ellipsis
// marks a cut).
std::string terminal_safe(std::string_view name, size_t columns, bool ascii_only);

// The kind of a function as the view shows it: JIT, inlined, interp, kernel, native, unknown.
std::string_view kind_label(profile::FrameKind kind);

// One plain-text snapshot, as --batch prints each interval: a header line, the targets, then the
// top rows of the hottest functions (columns separated by spaces, the function last).
std::string batch_snapshot(const TopModel& model, TopWindow window, TopOrder order, size_t rows);

} // namespace flamebpf::top
