#include "top/top_table.h"

#include <algorithm>
#include <cmath>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <map>
#include <unordered_map>
#include <wchar.h>

#include "common/hashing.h"
#include "common/utf8.h"
#include "profile/drop_report.h"

namespace flamebpf::top {
namespace {

const std::string kHost = "host";

uint64_t table_key(uint32_t target, uint32_t function)
{
  return (static_cast<uint64_t>(target) << 32) | function;
}

// Probes open-addressing slots (number + 1, 0 empty) from hash until matches(number) or an empty
// slot; returns the slot's index.
template <typename Matches>
size_t probe(const std::vector<uint32_t>& slots, uint64_t hash, Matches matches)
{
  size_t mask = slots.size() - 1;
  for (size_t at = hash & mask;; at = (at + 1) & mask) {
    if (slots[at] == 0 || matches(slots[at] - 1))
      return at;
  }
}

// The slots of numbers 0 to count - 1, each placed by hash_of(number), with room for as many more.
template <typename HashOf> std::vector<uint32_t> slots_for(size_t count, HashOf hash_of)
{
  size_t length = 64;
  while (length < 4 * (count + 1))
    length *= 2;
  std::vector<uint32_t> slots(length, 0);
  for (size_t number = 0; number < count; ++number)
    slots[probe(slots, hash_of(number), [](uint32_t) { return false; })] =
        static_cast<uint32_t>(number + 1);
  return slots;
}

uint64_t stack_hash(uint32_t target, uint32_t comm, std::span<const uint32_t> frames)
{
  Fnv1a words;
  words.add_word(target).add_word(comm);
  for (uint32_t frame : frames)
    words.add_word(frame);
  uint64_t hash = words.value();
  // The multiplications carry low bits up only; the slot is taken from the low bits.
  hash ^= hash >> 33;
  hash *= 0xff51afd7ed558ccdull;
  return hash ^ (hash >> 33);
}

// Combines two tables sorted by key: a's entries times keep_a plus b's times keep_b, without
// those whose total falls below drop_below.
FunctionTable combine(
    const FunctionTable& a, double keep_a, const FunctionTable& b, double keep_b, double drop_below)
{
  FunctionTable out;
  out.reserve(a.size() + b.size());
  auto push = [&](uint64_t key, double self, double total) {
    if (total >= drop_below)
      out.push_back({key, {self, total}});
  };
  size_t i = 0;
  size_t j = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && a[i].key < b[j].key)) {
      push(a[i].key, a[i].samples.self * keep_a, a[i].samples.total * keep_a);
      ++i;
    } else if (i == a.size() || b[j].key < a[i].key) {
      push(b[j].key, b[j].samples.self * keep_b, b[j].samples.total * keep_b);
      ++j;
    } else {
      push(a[i].key, a[i].samples.self * keep_a + b[j].samples.self * keep_b,
           a[i].samples.total * keep_a + b[j].samples.total * keep_b);
      ++i;
      ++j;
    }
  }
  return out;
}

// Columns a code point takes on a terminal; control characters are not let through at all.
int columns_of(char32_t code_point)
{
  int width = ::wcwidth(static_cast<wchar_t>(code_point));
  return width < 0 ? 1 : width;
}

bool is_control(char32_t code_point)
{
  return code_point < 0x20 || code_point == 0x7f || (code_point >= 0x80 && code_point < 0xa0);
}

} // namespace

uint32_t FunctionNames::intern(std::string_view text, profile::FrameKind kind)
{
  if (2 * (names_.size() + 1) > slots_.size())
    grow();
  uint64_t hash =
      Fnv1a(std::hash<std::string_view>()(text)).add_word(static_cast<uint64_t>(kind)).value();
  size_t at = probe(slots_, hash, [&](uint32_t id) {
    return hashes_[id] == hash && names_[id].kind == kind && names_[id].text == text;
  });
  if (slots_[at] != 0)
    return slots_[at] - 1;
  auto id = static_cast<uint32_t>(names_.size());
  names_.push_back({std::string(text), kind});
  hashes_.push_back(hash);
  slots_[at] = id + 1;
  return id;
}

void FunctionNames::grow()
{
  slots_ = slots_for(names_.size(), [&](size_t id) { return hashes_[id]; });
}

TopInterval compact_interval(const profile::SymbolizedProfile& profile, FunctionNames& names)
{
  TopInterval interval;
  interval.end = profile.end;
  interval.seconds = std::chrono::duration<double>(profile.end - profile.start).count();
  interval.frequency = profile.frequency_hz;
  interval.drops = profile::total_drops(profile.counters);
  std::unordered_map<std::string, uint32_t> target_ids;
  interval.stacks.reserve(profile.stacks.size());
  size_t frames = 0;
  for (const auto& stack : profile.stacks)
    frames += stack.frames.size();
  interval.frames.reserve(frames);
  for (const auto& stack : profile.stacks) {
    const std::string& target = stack.target.empty() ? kHost : stack.target;
    auto [it, added] = target_ids.try_emplace(target, static_cast<uint32_t>(target_ids.size()));
    if (added)
      interval.targets.push_back({target, 0});
    interval.targets[it->second].samples += stack.count;
    CompactStack compact;
    compact.target = it->second;
    compact.comm = names.intern(stack.comm, profile::FrameKind::kUnknown);
    compact.count = stack.count;
    compact.first = static_cast<uint32_t>(interval.frames.size());
    compact.size = static_cast<uint32_t>(stack.frames.size());
    for (const auto& frame : stack.frames)
      interval.frames.push_back(names.intern(frame.name, frame.kind));
    interval.stacks.push_back(compact);
  }
  return interval;
}

bool TopModel::StackPool::add(uint32_t target,
                              uint32_t comm,
                              std::span<const uint32_t> frames,
                              uint64_t count)
{
  if (2 * (stacks_.size() + 1) > slots_.size())
    grow();
  uint64_t hash = stack_hash(target, comm, frames);
  size_t at = probe(slots_, hash, [&](uint32_t index) {
    const Kept& kept = stacks_[index];
    return kept.hash == hash && kept.target == target && kept.comm == comm &&
           std::ranges::equal(std::span(frames_.data() + kept.first, kept.size), frames);
  });
  if (slots_[at] != 0) {
    stacks_[slots_[at] - 1].count += count;
    return true;
  }
  if (stacks_.size() >= kMaxStacksKept)
    return false;
  stacks_.push_back(
      {target, comm, frames_.size(), static_cast<uint32_t>(frames.size()), count, hash});
  frames_.insert(frames_.end(), frames.begin(), frames.end());
  slots_[at] = static_cast<uint32_t>(stacks_.size());
  return true;
}

void TopModel::StackPool::grow()
{
  slots_ = slots_for(stacks_.size(), [&](size_t index) { return stacks_[index].hash; });
}

FunctionTable TopModel::function_table(const TopInterval& interval)
{
  // Target by target (in the model's order, so the table comes out sorted), each stack adds self
  // to its leaf and total once to each distinct function in it.
  std::vector<std::vector<uint32_t>> by_target(target_names_.size());
  for (uint32_t i = 0; i < interval.stacks.size(); ++i)
    by_target[interval.stacks[i].target].push_back(i);
  Scratch& scratch = scratch_;
  size_t functions = names_.size();
  if (scratch.self.size() < functions) {
    scratch.self.resize(functions, 0);
    scratch.total.resize(functions, 0);
    scratch.last_stack.resize(functions, 0);
  }
  FunctionTable table;
  for (uint32_t target = 0; target < by_target.size(); ++target) {
    for (uint32_t index : by_target[target]) {
      const CompactStack& stack = interval.stacks[index];
      auto frames = interval.frames_of(stack);
      if (frames.empty() || stack.count == 0)
        continue;
      if (++scratch.stack_serial == 0) {
        // Wrapped: a stale number could equal the new one.
        std::fill(scratch.last_stack.begin(), scratch.last_stack.end(), 0);
        scratch.stack_serial = 1;
      }
      auto count = static_cast<double>(stack.count);
      scratch.self[frames.back()] += count;
      for (uint32_t function : frames) {
        if (scratch.last_stack[function] == scratch.stack_serial)
          continue;
        scratch.last_stack[function] = scratch.stack_serial;
        if (scratch.total[function] == 0)
          scratch.touched.push_back(function);
        scratch.total[function] += count;
      }
    }
    std::sort(scratch.touched.begin(), scratch.touched.end());
    for (uint32_t function : scratch.touched) {
      table.push_back(
          {table_key(target, function), {scratch.self[function], scratch.total[function]}});
      scratch.self[function] = 0;
      scratch.total[function] = 0;
    }
    scratch.touched.clear();
  }
  return table;
}

uint32_t TopModel::target_id(const std::string& name)
{
  auto found = find_target(name);
  if (found)
    return *found;
  target_names_.push_back(name);
  stopped_.push_back(false);
  return static_cast<uint32_t>(target_names_.size() - 1);
}

std::optional<uint32_t> TopModel::find_target(const std::string& name) const
{
  auto it = std::find(target_names_.begin(), target_names_.end(), name);
  if (it == target_names_.end())
    return std::nullopt;
  return static_cast<uint32_t>(it - target_names_.begin());
}

void TopModel::target_stopped(const std::string& name)
{
  stopped_[target_id(name)] = true;
}

void TopModel::target_started(const std::string& name)
{
  stopped_[target_id(name)] = false;
}

void TopModel::add(TopInterval interval)
{
  std::vector<uint32_t> ids;
  for (const auto& target : interval.targets)
    ids.push_back(target_id(target.name));
  for (auto& stack : interval.stacks)
    stack.target = ids[stack.target];
  last_table_ = function_table(interval);
  // The decaying average: each interval weighs half as much after kHalfLifeIntervals more.
  double keep = std::pow(0.5, 1 / kHalfLifeIntervals);
  decaying_ = combine(decaying_, keep, last_table_, 1 - keep, 0.01);
  since_start_ = combine(since_start_, 1, last_table_, 1, 0);
  for (const auto& stack : interval.stacks)
    if (!all_stacks_.add(stack.target, stack.comm, interval.frames_of(stack), stack.count))
      stacks_capped_ = true;
  // Renumbered: its targets are this model's.
  std::vector<TopTarget> targets(target_names_.size());
  for (size_t i = 0; i < targets.size(); ++i)
    targets[i].name = target_names_[i];
  for (size_t i = 0; i < interval.targets.size(); ++i)
    targets[ids[i]].samples = interval.targets[i].samples;
  interval.targets = std::move(targets);
  for (const auto& target : interval.targets)
    if (target.samples > 0)
      stopped_[*find_target(target.name)] = false;
  last_ = std::move(interval);
  ++intervals_;
}

std::vector<TopModel::TargetRow> TopModel::targets() const
{
  std::vector<TargetRow> rows;
  for (size_t i = 0; i < target_names_.size(); ++i) {
    TargetRow row{target_names_[i], 0, 0, stopped_[i]};
    if (last_ && i < last_->targets.size() && last_->seconds > 0) {
      row.samples_per_second = static_cast<double>(last_->targets[i].samples) / last_->seconds;
      if (last_->frequency > 0)
        row.cpu_percent = 100 * row.samples_per_second / last_->frequency;
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

const FunctionTable& TopModel::table(TopWindow window) const
{
  return window == TopWindow::kInterval   ? last_table_
         : window == TopWindow::kDecaying ? decaying_
                                          : since_start_;
}

double TopModel::samples(TopWindow window, const std::string& target) const
{
  // A function's total over the roots of every stack is the samples: sum the stacks instead.
  double sum = 0;
  auto wanted = target.empty() ? std::nullopt : find_target(target);
  if (!target.empty() && !wanted)
    return 0;
  if (window == TopWindow::kDecaying) {
    // The decaying table has no stacks: its self samples add up to them.
    for (const auto& entry : decaying_)
      if (!wanted || (entry.key >> 32) == *wanted)
        sum += entry.samples.self;
    return sum;
  }
  for (const auto& stack : stacks_of(window, target))
    sum += static_cast<double>(stack.count);
  return sum;
}

std::vector<TopRow> TopModel::rows(TopWindow window,
                                   TopOrder order,
                                   const std::string& target,
                                   const std::optional<std::regex>& filter) const
{
  auto wanted = target.empty() ? std::nullopt : find_target(target);
  if (!target.empty() && !wanted)
    return {};
  // One target's functions are one range of the table; all targets' add up by function.
  const FunctionTable& from = table(window);
  auto begin = from.begin();
  auto end = from.end();
  if (wanted) {
    auto by_key = [](const FunctionEntry& entry, uint64_t key) { return entry.key < key; };
    begin =
        std::lower_bound(from.begin(), from.end(), static_cast<uint64_t>(*wanted) << 32, by_key);
    end = std::lower_bound(begin, from.end(), static_cast<uint64_t>(*wanted + 1) << 32, by_key);
  }
  std::vector<FunctionSamples> by_function(names_.size());
  std::vector<uint32_t> functions;
  for (auto entry = begin; entry != end; ++entry) {
    auto function = static_cast<uint32_t>(entry->key);
    auto& sum = by_function[function];
    if (sum.self == 0 && sum.total == 0)
      functions.push_back(function);
    sum.self += entry->samples.self;
    sum.total += entry->samples.total;
  }
  double all = samples(window, target);
  std::vector<TopRow> rows;
  rows.reserve(functions.size());
  for (uint32_t function : functions) {
    const FunctionSamples& samples = by_function[function];
    if (samples.total < 0.5 && samples.self < 0.5)
      continue;
    if (filter && !std::regex_search(names_[function].text, *filter))
      continue;
    rows.push_back({function, samples.self, samples.total, all > 0 ? samples.self / all : 0,
                    all > 0 ? samples.total / all : 0});
  }
  std::sort(rows.begin(), rows.end(), [&](const TopRow& a, const TopRow& b) {
    double left = order == TopOrder::kSelf ? a.self : a.total;
    double right = order == TopOrder::kSelf ? b.self : b.total;
    if (left != right)
      return left > right;
    double other_left = order == TopOrder::kSelf ? a.total : a.self;
    double other_right = order == TopOrder::kSelf ? b.total : b.self;
    if (other_left != other_right)
      return other_left > other_right;
    return names_[a.function].text < names_[b.function].text;
  });
  return rows;
}

std::vector<TopModel::StackRef> TopModel::stacks_of(TopWindow window,
                                                    const std::string& target) const
{
  std::vector<StackRef> stacks;
  auto found = target.empty() ? std::nullopt : find_target(target);
  if (!target.empty() && !found)
    return stacks;
  bool every_target = target.empty();
  uint32_t wanted = found.value_or(0);
  if (window == TopWindow::kInterval) {
    if (last_)
      for (const auto& stack : last_->stacks)
        if (every_target || stack.target == wanted)
          stacks.push_back({stack.target, stack.comm, last_->frames_of(stack), stack.count});
    return stacks;
  }
  for (size_t i = 0; i < all_stacks_.size(); ++i)
    if (StackRef stack = all_stacks_[i]; every_target || stack.target == wanted)
      stacks.push_back(stack);
  return stacks;
}

TopModel::Tree TopModel::tree(uint32_t function,
                              TopWindow window,
                              const std::string& target,
                              size_t max_lines) const
{
  // Paths from the function (its outermost occurrence in each stack) to the root and to the
  // leaf, merged by prefix as a flame graph merges them.
  struct Node {
    double samples = 0;
    std::map<uint32_t, Node> children;
  };
  Node up;
  Node down;
  for (const auto& stack : stacks_of(window, target)) {
    const auto& frames = stack.frames;
    auto at = std::find(frames.begin(), frames.end(), function);
    if (at == frames.end())
      continue;
    auto count = static_cast<double>(stack.count);
    up.samples += count;
    down.samples += count;
    Node* node = &up;
    for (auto it = std::make_reverse_iterator(at); it != frames.rend(); ++it) {
      node = &node->children[*it];
      node->samples += count;
    }
    node = &down;
    for (auto it = at + 1; it != frames.end(); ++it) {
      node = &node->children[*it];
      node->samples += count;
    }
  }
  Tree tree;
  auto flatten = [&](const Node& root, std::vector<TreeLine>& out) {
    out.push_back({0, function, root.samples > 0 ? 1.0 : 0.0});
    // Depth first, the heaviest child first, up to max_lines.
    auto walk = [&](auto&& self, const Node& node, int depth) -> void {
      std::vector<std::pair<uint32_t, const Node*>> children;
      for (const auto& [id, child] : node.children)
        children.emplace_back(id, &child);
      std::sort(children.begin(), children.end(),
                [](const auto& a, const auto& b) { return a.second->samples > b.second->samples; });
      for (const auto& [id, child] : children) {
        if (out.size() >= max_lines)
          return;
        out.push_back({depth, id, root.samples > 0 ? child->samples / root.samples : 0});
        self(self, *child, depth + 1);
      }
    };
    walk(walk, root, 1);
  };
  flatten(up, tree.callers);
  flatten(down, tree.callees);
  return tree;
}

profile::SymbolizedProfile TopModel::profile(TopWindow window, const std::string& target) const
{
  profile::SymbolizedProfile out;
  if (last_) {
    out.end = last_->end;
    out.frequency_hz = last_->frequency;
  }
  for (const auto& stack : stacks_of(window, target)) {
    profile::Stack converted;
    converted.comm = names_[stack.comm].text;
    converted.target = target_names_[stack.target] == kHost ? "" : target_names_[stack.target];
    converted.count = stack.count;
    for (uint32_t frame : stack.frames)
      converted.frames.push_back({names_[frame].text, "", names_[frame].kind});
    out.stacks.push_back(std::move(converted));
  }
  return out;
}

std::string terminal_safe(std::string_view name, size_t columns, bool ascii_only)
{
  // Each character as shown, with its columns.
  std::vector<std::pair<std::string_view, size_t>> shown;
  size_t width = 0;
  for (size_t at = 0; at < name.size();) {
    char32_t code_point = 0;
    size_t length = utf8::sequence_at(name, at, code_point);
    if (length == 0 || is_control(code_point) || (ascii_only && code_point >= 0x80)) {
      shown.emplace_back("?", 1);
      at += length == 0 ? 1 : length;
    } else {
      shown.emplace_back(name.substr(at, length), static_cast<size_t>(columns_of(code_point)));
      at += length;
    }
    width += shown.back().second;
    if (width > columns + 2)
      break; // enough to know it is cut
  }
  std::string out;
  if (width <= columns) {
    for (const auto& [text, columns_taken] : shown)
      out += text;
    return out;
  }
  if (columns == 0)
    return out;
  // Cut: the last column is an ellipsis.
  size_t used = 0;
  for (const auto& [text, columns_taken] : shown) {
    if (used + columns_taken > columns - 1)
      break;
    out += text;
    used += columns_taken;
  }
  out += ascii_only ? "~" : "\xE2\x80\xA6"; // "…"
  return out;
}

std::string_view kind_label(profile::FrameKind kind)
{
  switch (kind) {
  case profile::FrameKind::kJit:
    return "JIT";
  case profile::FrameKind::kInlined:
    return "inlined";
  case profile::FrameKind::kInterpreted:
    return "interp";
  case profile::FrameKind::kKernel:
    return "kernel";
  case profile::FrameKind::kNative:
    return "native";
  case profile::FrameKind::kUnknown:
    break;
  }
  return "unknown";
}

std::string batch_snapshot(const TopModel& model, TopWindow window, TopOrder order, size_t rows)
{
  std::string out;
  const auto& last = model.last();
  if (!last)
    return out;
  out += fmt::format("flamebpf top - {:%Y-%m-%dT%H:%M:%S}Z, interval {:.1f} s at {} Hz, "
                     "flamebpf {:.1f}% CPU, {} drops{}{}\n",
                     std::chrono::floor<std::chrono::seconds>(last->end), last->seconds,
                     last->frequency, last->own_cpu_percent, last->drops,
                     last->coverage.empty() ? "" : ", ",
                     terminal_safe(last->coverage, 400, true)); // it names targets
  out += "TARGET SAMPLES/S CPU% STATE\n";
  for (const auto& target : model.targets())
    out += fmt::format("{} {:.0f} {:.1f} {}\n", terminal_safe(target.name, 200, true),
                       target.samples_per_second, target.cpu_percent,
                       target.stopped ? "stopped" : "running");
  out += "SELF% TOTAL% SAMPLES KIND FUNCTION\n";
  auto table = model.rows(window, order, "", std::nullopt);
  for (size_t i = 0; i < table.size() && i < rows; ++i) {
    const auto& row = table[i];
    const auto& name = model.names()[row.function];
    out += fmt::format("{:.1f} {:.1f} {:.0f} {} {}\n", 100 * row.self_share, 100 * row.total_share,
                       order == TopOrder::kSelf ? row.self : row.total, kind_label(name.kind),
                       terminal_safe(name.text, 400, true));
  }
  out += "\n";
  return out;
}

} // namespace flamebpf::top
