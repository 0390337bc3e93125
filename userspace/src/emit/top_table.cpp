#include "emit/top_table.h"

#include <algorithm>
#include <cmath>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <map>
#include <wchar.h>

#include "common/utf8.h"
#include "profile/drop_report.h"

namespace flamebpf::emit {
namespace {

const std::string kHost = "host";

uint64_t table_key(uint32_t target, uint32_t function)
{
  return (static_cast<uint64_t>(target) << 32) | function;
}

// Adds one stack's samples: self to its leaf, total once to each distinct function in it.
void add_stack(FunctionTable& table,
               uint32_t target,
               const std::vector<uint32_t>& frames,
               double count)
{
  if (frames.empty())
    return;
  table[table_key(target, frames.back())].self += count;
  for (size_t i = 0; i < frames.size(); ++i) {
    // Recursion counts once: only the outermost occurrence adds.
    if (std::find(frames.begin(), frames.begin() + static_cast<std::ptrdiff_t>(i), frames[i]) !=
        frames.begin() + static_cast<std::ptrdiff_t>(i))
      continue;
    table[table_key(target, frames[i])].total += count;
  }
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
  auto& ids = ids_[static_cast<size_t>(kind) % ids_.size()];
  if (auto found = ids.find(text); found != ids.end())
    return found->second;
  auto id = static_cast<uint32_t>(names_.size());
  ids.emplace(std::string(text), id);
  names_.push_back({std::string(text), kind});
  return id;
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
    compact.frames.reserve(stack.frames.size());
    for (const auto& frame : stack.frames)
      compact.frames.push_back(names.intern(frame.name, frame.kind));
    interval.stacks.push_back(std::move(compact));
  }
  return interval;
}

FunctionTable function_table(const TopInterval& interval, const std::vector<uint32_t>& target_ids)
{
  FunctionTable table;
  for (const auto& stack : interval.stacks)
    add_stack(table, target_ids[stack.target], stack.frames, static_cast<double>(stack.count));
  return table;
}

size_t TopModel::StackKeyHash::operator()(const StackKey& key) const
{
  uint64_t hash = (static_cast<uint64_t>(key.target) << 32) ^ key.comm;
  for (uint32_t frame : key.frames)
    hash = (hash ^ frame) * 0x100000001b3ull;
  return static_cast<size_t>(hash);
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
  std::vector<uint32_t> identity(target_names_.size());
  for (size_t i = 0; i < identity.size(); ++i)
    identity[i] = static_cast<uint32_t>(i);
  last_table_ = function_table(interval, identity);
  // The decaying average: each interval weighs half as much after kHalfLifeIntervals more.
  double keep = std::pow(0.5, 1 / kHalfLifeIntervals);
  for (auto& [key, samples] : decaying_) {
    samples.self *= keep;
    samples.total *= keep;
  }
  std::erase_if(decaying_, [](const auto& entry) { return entry.second.total < 0.01; });
  for (const auto& [key, samples] : last_table_) {
    decaying_[key].self += samples.self * (1 - keep);
    decaying_[key].total += samples.total * (1 - keep);
    since_start_[key].self += samples.self;
    since_start_[key].total += samples.total;
  }
  for (auto& stack : interval.stacks) {
    StackKey key{stack.target, stack.comm, stack.frames};
    if (auto it = all_stacks_.find(key); it != all_stacks_.end())
      it->second += stack.count;
    else if (all_stacks_.size() < kMaxStacksKept)
      all_stacks_.emplace(std::move(key), stack.count);
    else
      stacks_capped_ = true;
  }
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
    for (const auto& [key, samples] : decaying_)
      if (!wanted || (key >> 32) == *wanted)
        sum += samples.self;
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
  std::unordered_map<uint32_t, FunctionSamples> merged;
  for (const auto& [key, samples] : table(window)) {
    if (wanted && (key >> 32) != *wanted)
      continue;
    auto& row = merged[static_cast<uint32_t>(key)];
    row.self += samples.self;
    row.total += samples.total;
  }
  double all = samples(window, target);
  std::vector<TopRow> rows;
  rows.reserve(merged.size());
  for (const auto& [function, samples] : merged) {
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
          stacks.push_back({stack.target, stack.comm, &stack.frames, stack.count});
    return stacks;
  }
  for (const auto& [key, count] : all_stacks_)
    if (every_target || key.target == wanted)
      stacks.push_back({key.target, key.comm, &key.frames, count});
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
    const auto& frames = *stack.frames;
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
    for (uint32_t frame : *stack.frames)
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
                     "flamebpf {:.1f}% CPU, {} drops\n",
                     std::chrono::floor<std::chrono::seconds>(last->end), last->seconds,
                     last->frequency, last->own_cpu_percent, last->drops);
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

} // namespace flamebpf::emit
