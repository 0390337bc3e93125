#include "perf_oracle.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <set>
#include <vector>

#include "harness.h"
#include "process.h"

namespace flamebpf::testing {
namespace {

std::string_view trim(std::string_view text)
{
  size_t first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos)
    return {};
  size_t last = text.find_last_not_of(" \t\r");
  return text.substr(first, last - first + 1);
}

// One frame line of perf script: "<address> <symbol> (<object>)", the symbol possibly with spaces.
// Returns false for a kernel frame.
bool parse_frame(std::string_view line, std::string& symbol)
{
  line = trim(line);
  size_t space = line.find(' ');
  std::string_view rest = space == std::string_view::npos ? "" : trim(line.substr(space + 1));
  std::string_view object;
  if (rest.ends_with(')')) {
    size_t open = rest.rfind(" (");
    if (open != std::string_view::npos) {
      object = rest.substr(open + 2, rest.size() - open - 3);
      rest = trim(rest.substr(0, open));
    } else if (rest.starts_with('(')) {
      object = rest.substr(1, rest.size() - 2);
      rest = {};
    }
  }
  // [kernel.kallsyms], [bpf_prog], and kernel modules ([nf_tables]); [vdso] is user code.
  if (object.starts_with('[') && object != "[vdso]" && object != "[unknown]")
    return false;
  symbol = rest.empty() ? "[unknown]" : std::string(rest);
  return true;
}

// Drops a balanced parameter list at the end of name: "run(double, unsigned long)" -> "run".
std::string_view without_parameters(std::string_view name)
{
  if (!name.ends_with(')'))
    return name;
  int depth = 0;
  for (size_t at = name.size(); at-- > 0;) {
    if (name[at] == ')')
      ++depth;
    else if (name[at] == '(' && --depth == 0)
      return at == 0 ? name : name.substr(0, at);
  }
  return name;
}

std::string common_name(std::string_view name)
{
  name = without_parameters(name);
  if (size_t at = name.find('@'); at != std::string_view::npos && at > 0)
    name = name.substr(0, at);
  // Clone suffixes: "msort_with_tmp.part.0", "f.constprop.0", "g.cold".
  if (size_t dot = name.find('.'); dot != std::string_view::npos && dot > 0)
    name = name.substr(0, dot);
  if (name.starts_with("__GI_"))
    name.remove_prefix(5);
  while (name.size() > 1 && name.front() == '_')
    name.remove_prefix(1);
  // glibc's memcpy variants are its memmove variants under a second name (one address); perf
  // and flamebpf each pick one of the two.
  if (name.starts_with("memcpy"))
    return "memmove" + std::string(name.substr(6));
  return std::string(name);
}

std::vector<std::string_view> split_frames(std::string_view stack)
{
  std::vector<std::string_view> frames;
  size_t start = 0;
  while (start <= stack.size()) {
    size_t end = stack.find(';', start);
    if (end == std::string_view::npos)
      end = stack.size();
    frames.push_back(stack.substr(start, end - start));
    start = end + 1;
  }
  return frames;
}

// A main-rooted stack's share of the samples that reach main.
std::map<std::string, double> main_rooted_shares(const FoldedStacks& comparable)
{
  uint64_t rooted = 0;
  for (const auto& [stack, count] : comparable)
    rooted += stack == kNoMain ? 0 : count;
  std::map<std::string, double> shares;
  if (rooted == 0)
    return shares;
  for (const auto& [stack, count] : comparable) {
    if (stack != kNoMain)
      shares[stack] = static_cast<double>(count) / static_cast<double>(rooted);
  }
  return shares;
}

} // namespace

FoldedStacks collapse_perf_script(std::string_view script)
{
  FoldedStacks stacks;
  std::string comm;
  std::vector<std::string> frames; // leaf first, as perf prints them
  bool in_sample = false;
  auto finish = [&] {
    if (!in_sample)
      return;
    std::string line = comm;
    for (auto frame = frames.rbegin(); frame != frames.rend(); ++frame)
      line += ";" + *frame;
    ++stacks[line];
    frames.clear();
    in_sample = false;
  };
  size_t start = 0;
  while (start < script.size()) {
    size_t end = script.find('\n', start);
    if (end == std::string_view::npos)
      end = script.size();
    std::string_view line = script.substr(start, end - start);
    start = end + 1;
    if (trim(line).empty()) {
      finish();
      continue;
    }
    if (line.front() != ' ' && line.front() != '\t') {
      // A sample's header: its comm (with -F comm,ip,sym,dso, nothing else).
      finish();
      comm = std::string(trim(line));
      in_sample = true;
      continue;
    }
    std::string symbol;
    if (in_sample && parse_frame(line, symbol))
      frames.push_back(symbol);
  }
  finish();
  return stacks;
}

PerfRecording
perf_record(pid_t pid, double seconds, int hz, PerfCallGraph call_graph, const std::string& dir)
{
  PerfRecording recording;
  std::string data = dir + "/perf.data";
  std::string log = dir + "/perf-record.log";
  Child perf({"/usr/bin/perf", "record", "-q", "-e", "cpu-clock", "-F", std::to_string(hz),
              "--call-graph", call_graph == PerfCallGraph::kDwarf ? "dwarf" : "fp", "-p",
              std::to_string(pid), "-o", data, "--", "/bin/sleep", fmt::format("{:.3f}", seconds)},
             "", log);
  recording.cpu_seconds = cpu_seconds_at_exit(perf);
  std::error_code error;
  recording.data_bytes = std::filesystem::file_size(data, error);
  EXPECT_FALSE(error) << "perf record wrote no " << data << ": " << read_text(log);
  if (error)
    return recording;
  auto script =
      run_process({"/usr/bin/perf", "script", "-i", data, "--no-inline", "-F", "comm,ip,sym,dso"},
                  {}, std::chrono::minutes(3));
  EXPECT_EQ(script.status, 0) << "perf script failed: " << script.err;
  recording.stacks = collapse_perf_script(script.out);
  recording.samples = sample_count(recording.stacks);
  return recording;
}

FoldedStacks comparable_stacks(const FoldedStacks& stacks, const std::string& comm)
{
  FoldedStacks comparable;
  for (const auto& [stack, count] : stacks) {
    auto frames = split_frames(stack);
    if (frames.empty() || frames.front() != comm)
      continue;
    std::vector<std::string> names;
    for (size_t at = 1; at < frames.size(); ++at) {
      std::string_view frame = frames[at];
      if (frame.ends_with("_[k]") || frame.ends_with("_[i]"))
        continue;
      std::string name = common_name(frame);
      if (names.empty() || names.back() != name)
        names.push_back(std::move(name));
    }
    auto root = std::find(names.begin(), names.end(), "main");
    if (root == names.end()) {
      comparable[kNoMain] += count;
      continue;
    }
    std::string line;
    for (auto name = root; name != names.end(); ++name)
      line += (line.empty() ? "" : ";") + *name;
    comparable[line] += count;
  }
  return comparable;
}

uint64_t sample_count(const FoldedStacks& stacks)
{
  uint64_t samples = 0;
  for (const auto& [stack, count] : stacks)
    samples += count;
  return samples;
}

double share_reaching_main(const FoldedStacks& comparable)
{
  uint64_t samples = sample_count(comparable);
  if (samples == 0)
    return 0;
  auto unrooted = comparable.find(kNoMain);
  uint64_t without = unrooted == comparable.end() ? 0 : unrooted->second;
  return static_cast<double>(samples - without) / static_cast<double>(samples);
}

uint64_t samples_under(const FoldedStacks& comparable, const std::string& prefix)
{
  uint64_t samples = 0;
  for (const auto& [stack, count] : comparable) {
    if (stack == prefix || stack.starts_with(prefix + ";"))
      samples += count;
  }
  return samples;
}

double distribution_distance(const FoldedStacks& left, const FoldedStacks& right)
{
  auto left_shares = main_rooted_shares(left);
  auto right_shares = main_rooted_shares(right);
  std::set<std::string> keys;
  for (const auto& [stack, share] : left_shares)
    keys.insert(stack);
  for (const auto& [stack, share] : right_shares)
    keys.insert(stack);
  double sum = 0;
  for (const auto& key : keys) {
    double a = left_shares.contains(key) ? left_shares[key] : 0;
    double b = right_shares.contains(key) ? right_shares[key] : 0;
    sum += a > b ? a - b : b - a;
  }
  return sum / 2;
}

std::string
largest_differences(const FoldedStacks& left, const FoldedStacks& right, size_t how_many)
{
  auto left_shares = main_rooted_shares(left);
  auto right_shares = main_rooted_shares(right);
  std::vector<std::tuple<double, double, double, std::string>> rows;
  std::set<std::string> keys;
  for (const auto& [stack, share] : left_shares)
    keys.insert(stack);
  for (const auto& [stack, share] : right_shares)
    keys.insert(stack);
  for (const auto& key : keys) {
    double a = left_shares.contains(key) ? left_shares[key] : 0;
    double b = right_shares.contains(key) ? right_shares[key] : 0;
    rows.emplace_back(a > b ? a - b : b - a, a, b, key);
  }
  std::sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) { return x > y; });
  std::string text = fmt::format("main-rooted shares (left | right); not reaching main: {} | {}\n",
                                 left.contains(kNoMain) ? left.at(kNoMain) : 0,
                                 right.contains(kNoMain) ? right.at(kNoMain) : 0);
  for (size_t at = 0; at < rows.size() && at < how_many; ++at) {
    const auto& [difference, a, b, stack] = rows[at];
    text += fmt::format("  {:6.2f}% | {:6.2f}%  {}\n", 100 * a, 100 * b, stack);
  }
  return text;
}

} // namespace flamebpf::testing
