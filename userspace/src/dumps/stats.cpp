#include "dumps/stats.h"

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <set>
#include <sys/resource.h>
#include <unistd.h>

#include "common/procfs.h"
#include "common/text.h"
#include "common/utf8.h"
#include "profile/drop_report.h"

namespace flamebpf::dumps {
namespace {

std::string iso_time(Clock::time_point time)
{
  std::time_t seconds = Clock::to_time_t(time);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(time.time_since_epoch() %
                                                                      std::chrono::seconds(1))
                    .count();
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  return fmt::format("{}.{:03}Z", text, millis);
}

std::string clock_time(Clock::time_point time)
{
  std::time_t seconds = Clock::to_time_t(time);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[16];
  std::strftime(text, sizeof text, "%H:%M:%S", &utc);
  return text;
}

double share(uint64_t part, uint64_t whole)
{
  return whole == 0 ? 0 : static_cast<double>(part) / static_cast<double>(whole);
}

} // namespace

const std::vector<std::pair<int, const char*>>& drop_kinds()
{
  static const std::vector<std::pair<int, const char*>> kinds{
      {FB_COUNTER_KSTACK_COLLISION, "kernel_stack_collisions"},
      {FB_COUNTER_USTACK_COLLISION, "user_stack_collisions"},
      {FB_COUNTER_STACK_MAP_FULL, "stack_map_full"},
      {FB_COUNTER_COUNT_MAP_FULL, "count_map_full"},
      {FB_COUNTER_TARGET_SHARE_FULL, "target_share_full"},
      {FB_COUNTER_KSTACK_ERROR, "kernel_stack_errors"},
      {FB_COUNTER_USTACK_MISSING, "user_stacks_unreadable"},
      {FB_COUNTER_NOTICE_LOST, "process_notices_lost"},
  };
  return kinds;
}

OwnUsage own_usage()
{
  OwnUsage usage;
  rusage self{};
  if (::getrusage(RUSAGE_SELF, &self) == 0)
    usage.cpu_seconds = static_cast<double>(self.ru_utime.tv_sec + self.ru_stime.tv_sec) +
                        static_cast<double>(self.ru_utime.tv_usec + self.ru_stime.tv_usec) / 1e6;
  if (auto statm = procfs::read_file("/proc/self/statm", 256)) {
    // "size resident shared text lib data dt", in pages.
    auto fields = text::split_fields(*statm);
    if (auto resident = fields.size() > 1 ? text::parse_number<uint64_t>(fields[1]) : std::nullopt)
      usage.rss_bytes = *resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  }
  if (auto status = procfs::read_file("/proc/self/status", 8192)) {
    // "RssAnon:\t    1234 kB"
    if (auto line = procfs::status_line(*status, "RssAnon")) {
      auto fields = text::split_fields(*line);
      if (auto kib = fields.empty() ? std::nullopt : text::parse_number<uint64_t>(fields[0]))
        usage.rss_anon_bytes = *kib << 10;
    }
  }
  std::error_code ignored;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ignored);
       it != std::filesystem::directory_iterator(); it.increment(ignored))
    ++usage.open_fds;
  if (usage.open_fds > 0)
    --usage.open_fds; // the directory iterator's own
  return usage;
}

std::string json_string(std::string_view s)
{
  std::string out = "\"";
  for (size_t at = 0; at < s.size();) {
    char32_t code_point = 0;
    size_t length = utf8::sequence_at(s, at, code_point);
    if (length == 0) {
      // JSON is UTF-8 text: a byte outside any valid sequence becomes U+FFFD.
      out += "\\ufffd";
      ++at;
      continue;
    }
    switch (code_point) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (code_point < 0x20 || code_point == 0x7f)
        out += fmt::format("\\u{:04x}", static_cast<uint32_t>(code_point));
      else
        out.append(s, at, length);
    }
    at += length;
  }
  out += '"';
  return out;
}

std::string stats_json(const IntervalStats& stats)
{
  const profile::SymbolizedProfile& profile = *stats.profile;
  std::map<std::string, std::pair<uint64_t, std::set<uint32_t>>> targets;
  for (const auto& stack : profile.stacks) {
    auto& target = targets[stack.target];
    target.first += stack.count;
    target.second.insert(stack.pid);
  }
  std::string json = "{";
  json +=
      fmt::format("\"start\":\"{}\",\"end\":\"{}\",\"samples\":{}", iso_time(stats.window.start),
                  iso_time(stats.window.end), profile.total_samples());
  // The host's name, as pprof's node label has it: one line per node once lines are gathered.
  json += fmt::format(",\"node\":{}", json_string(profile.node));
  json += ",\"targets\":{";
  bool first = true;
  for (const auto& [name, target] : targets) {
    json += fmt::format("{}{}:{{\"samples\":{},\"processes\":{}", first ? "" : ",",
                        json_string(name), target.first, target.second.size());
    // The same names pprof labels its samples with.
    if (auto labels = profile.target_labels.find(name); labels != profile.target_labels.end()) {
      for (const auto& [key, value] : {std::pair{"container", &labels->second.container},
                                       std::pair{"container_id", &labels->second.container_id},
                                       std::pair{"namespace", &labels->second.namespace_name},
                                       std::pair{"pod", &labels->second.pod}}) {
        if (!value->empty())
          json += fmt::format(",\"{}\":{}", key, json_string(*value));
      }
    }
    json += "}";
    first = false;
  }
  json += fmt::format("}},\"drops\":{{\"total\":{}", profile::total_drops(profile.counters));
  for (const auto& [counter, name] : drop_kinds())
    json += fmt::format(",\"{}\":{}", name, profile.counters[counter]);
  const auto& frames = profile.symbolize_stats;
  json +=
      fmt::format("}},\"unnamed_frames\":{{\"native\":{},\"native_unnamed\":{},"
                  "\"native_share\":{:.4f},\"jit\":{},\"jit_unnamed\":{},\"jit_share\":{:.4f}}}",
                  frames.native_frames, frames.native_unnamed,
                  share(frames.native_unnamed, frames.native_frames), frames.jit_frames,
                  frames.jit_unnamed, share(frames.jit_unnamed, frames.jit_frames));
  // What the budgets on targets' names cut: names ending in "[truncated]", stacks with a
  // "[truncated]" frame in place of those they lost.
  json += fmt::format(",\"native_inlined_frames\":{}", frames.native_inlined_frames);
  json += fmt::format(",\"truncated\":{{\"names\":{},\"stacks\":{}}}", frames.truncated_names,
                      frames.truncated_stacks);
  // What each target's samples stand for against the CPU time it used (profile/coverage.h).
  json += ",\"coverage\":{";
  first = true;
  for (const auto& target : stats.coverage) {
    json += fmt::format(
        "{}{}:{{\"cpu_seconds\":{:.3f},\"expected_samples\":{:.1f},\"samples\":{},"
        "\"whole_samples\":{},\"coverage\":{:.4f},\"judged\":{},\"shortfall\":{{\"drops\":{:.1f},"
        "\"unwinding\":{:.1f},\"naming\":{:.1f},\"sampling_rate\":{:.1f}}},\"reason\":\"{}\"}}",
        first ? "" : ",", json_string(target.target), target.cpu_seconds, target.expected_samples,
        target.samples, target.whole_samples, target.coverage, profile::judged(target),
        target.drops, target.unwinding, target.naming, target.sampling,
        profile::shortfall_name(target.reason));
    first = false;
  }
  json += "}";
  json += ",\"perf_maps\":[";
  first = true;
  for (const auto& map : stats.perf_maps) {
    json += fmt::format("{}{{\"pid\":{},\"target\":{},\"age_seconds\":{:.1f}}}", first ? "" : ",",
                        map.pid, json_string(map.target), map.age_seconds);
    first = false;
  }
  json += fmt::format("],\"flamebpf\":{{\"cpu_seconds\":{:.3f},\"interval_cpu_seconds\":{:.3f},"
                      "\"rss_bytes\":{},\"rss_anon_bytes\":{},\"open_fds\":{}",
                      stats.usage.cpu_seconds, stats.interval_cpu_seconds, stats.usage.rss_bytes,
                      stats.usage.rss_anon_bytes, stats.usage.open_fds);
  json += ",\"memory_bytes\":{";
  for (MemoryKind kind : kAllMemoryKinds)
    json += fmt::format("\"{}\":{},", memory_kind_name(kind), stats.memory.of(kind));
  json += fmt::format("\"total\":{}}}}}", stats.memory.total());
  const Occupancy& held = stats.occupancy;
  json += fmt::format(",\"occupancy\":{{\"known_images\":{},\"cgroup_targets\":{},"
                      "\"pid_targets\":{},\"processes\":{},\"elf_files\":{},"
                      "\"symbol_bytes\":{},\"symbol_tables\":{}}}",
                      held.known_images, held.cgroup_targets, held.pid_targets, held.processes,
                      held.elf_files, held.symbol_bytes, held.symbol_tables);
  json += fmt::format(",\"files_written\":{},\"dumps_pending\":{}}}", stats.files_written,
                      stats.dumps_pending);
  return json;
}

namespace {

// "12.4 MiB (symbols 10.1, inlines 2.2)": the total, and the kinds that hold 0.1 MiB or more.
std::string memory_summary(const MemoryBreakdown& memory)
{
  auto mib = [](uint64_t bytes) { return static_cast<double>(bytes) / (1 << 20); };
  std::string kinds;
  for (MemoryKind kind : kAllMemoryKinds) {
    if (memory.of(kind) < (uint64_t{1} << 20) / 20)
      continue; // 0.0 once rounded
    kinds += fmt::format("{}{} {:.1f}", kinds.empty() ? "" : ", ", memory_kind_name(kind),
                         mib(memory.of(kind)));
  }
  return fmt::format("{:.1f} MiB{}{}{}", mib(memory.total()), kinds.empty() ? "" : " (", kinds,
                     kinds.empty() ? "" : ")");
}

} // namespace

std::string summary_line(const IntervalStats& stats)
{
  const profile::SymbolizedProfile& profile = *stats.profile;
  std::set<std::string> targets;
  for (const auto& stack : profile.stacks)
    targets.insert(stack.target);
  const auto& frames = profile.symbolize_stats;
  std::string coverage = profile::coverage_summary(stats.coverage);
  return fmt::format(
      "interval {}\xE2\x80\x93{}: {} samples in {} targets, {} drops, unnamed "
      "frames: native {:.1f}%, JIT {:.1f}%; {}{}flamebpf CPU {:.2f} s, RSS {} MB, memory {}",
      clock_time(stats.window.start), clock_time(stats.window.end), profile.total_samples(),
      targets.size(), profile::total_drops(profile.counters),
      100 * share(frames.native_unnamed, frames.native_frames),
      100 * share(frames.jit_unnamed, frames.jit_frames), coverage, coverage.empty() ? "" : "; ",
      stats.interval_cpu_seconds, stats.usage.rss_bytes >> 20, memory_summary(stats.memory));
}

} // namespace flamebpf::dumps
