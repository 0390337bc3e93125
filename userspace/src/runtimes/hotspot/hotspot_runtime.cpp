#include "runtimes/hotspot/hotspot_runtime.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <fmt/format.h>

#include "bpf_abi.h"
#include "common/log.h"
#include "runtimes/hotspot/agent_library.h"
#include "runtimes/hotspot/jvm_traits.h"
#include "symbolize/perf_map_names.h"

namespace flamebpf::hotspot {
namespace {

using symbolize::ImageKey;
using symbolize::MappedCode;
using symbolize::ProcessImage;
using symbolize::ProcessTable;

// The code cache is anonymous executable memory: a record of code anywhere else is garbage.
std::vector<CodeRange> code_cache(const ProcessImage& image)
{
  std::vector<CodeRange> ranges;
  for (const auto& mapped : image.code) {
    if (mapped.mapping.path.empty())
      ranges.push_back({mapped.mapping.start, mapped.mapping.end});
  }
  return ranges;
}

// The frame of an interpreted method the agent named (method_name.h's form): the display form
// of a compiled method's, of kind kInterpreted; a name that is not Java's is kept as it is.
profile::Frame interpreted_frame(std::string_view name, bool java_signatures)
{
  auto method = symbolize::java_method_name(name, java_signatures);
  return {method ? std::move(*method) : std::string(name), "", profile::FrameKind::kInterpreted};
}

// A read of a JVM's records (or of a line of them) that its file system left unanswered.
void warn_records_stalled(uint32_t pid)
{
  spdlog::warn("unwind records of pid {}: no answer within {} ms (its file system stalls); its "
               "interpreted frames stay unnamed until it answers",
               pid, HotSpotRuntime::kStallLimit.count());
}

} // namespace

HotSpotRuntime::HotSpotRuntime(HotSpotOptions options)
    : options_(std::move(options)),
      attacher_(std::make_unique<AgentAttacher>(agent_library(), options_.attacher))
{
  if (options_.unwinds_by_records)
    attacher_->unwind_by_agent_records();
}

HotSpotRuntime::~HotSpotRuntime() = default;

bool HotSpotRuntime::Image::records_usable()
{
  if (records_stalled &&
      records_stalled->wait_for(std::chrono::seconds(0)) == std::future_status::ready)
    records_stalled.reset();
  return records && !records_stalled;
}

std::string HotSpotRuntime::describe(const ProcessTable& processes,
                                     const ImageKey& key,
                                     const ProcessImage& image)
{
  const profile::TargetNames& names = processes.targets();
  const std::string& name = profile::target_of(names, 0, key.pid, {image.cgroup, image.cgroup_id});
  if (name != names.unmatched)
    return "target " + name;
  if (!image.cgroup.empty() && image.cgroup != "/")
    return "cgroup " + image.cgroup;
  return "the host";
}

void HotSpotRuntime::captured(ProcessTable& processes,
                              const ImageKey& key,
                              const ProcessImage& image,
                              const std::vector<procfs::Mapping>& mappings)
{
  auto traits = jvm_traits(mappings);
  if (!traits.hotspot && !traits.launcher && !images_.contains(key))
    return;
  Image& state = images_[key];
  // Found at the capture that first finds the VM, often not the first: a launcher may be sampled
  // before it loads libjvm.so.
  bool found = traits.hotspot && !state.jvm;
  state.jvm |= traits.hotspot;
  state.launcher = traits.launcher && !state.jvm;
  state.keeps_perf_map |= traits.keeps_perf_map;
  if (!state.jvm)
    return;
  // The map is opened now, while the process lives: a JVM that exits before the interval ends
  // is still read to its end through the open file.
  if (!image.perf_map)
    processes.read_perf_map(key);
  if (!found)
    return;
  ++jvms_found_;
  if (attacher_)
    attacher_->on_jvm(key.pid, state.keeps_perf_map, describe(processes, key, image));
}

std::optional<runtimes::NamedCode> HotSpotRuntime::name_code(ProcessTable& processes,
                                                             const ImageKey& key,
                                                             uint64_t address,
                                                             bool anonymous)
{
  auto it = images_.find(key);
  if (it == images_.end() || !it->second.jvm)
    return std::nullopt;
  auto entry = processes.perf_map_entry(key, address);
  // Where the map does not name it, the code cache may, read from outside.
  if (!entry && anonymous)
    entry = code_read_from_outside(processes, key, address);
  if (!entry) {
    if (anonymous)
      unnamed_.insert(key.pid);
    return runtimes::NamedCode{};
  }
  return symbolize::perf_map_code(*entry, options_.java_signatures);
}

std::optional<profile::Frame>
HotSpotRuntime::name_marker(ProcessTable& processes, const ImageKey& key, uint64_t frame)
{
  if (!(frame & FB_FRAME_RUNTIME_MARKER))
    return std::nullopt;
  if (const JvmRecords* found = records(processes, key, false)) {
    uint64_t method = frame & ~FB_FRAME_RUNTIME_MARKER;
    if (!found->method_name_read(method) && found->method_line(method)) {
      // Its line is read again, from the file the records were read from: as their reads, in the
      // stall guard's worker.
      Image& state = images_.at(key);
      auto outcome = stall_guard_.run<bool>([reader = state.records, method] {
        reader->read_method_name(method);
        return true;
      });
      if (outcome && outcome->stalled) {
        state.records_stalled = outcome->result;
        warn_records_stalled(key.pid);
      }
      found = state.records_usable() ? &state.records->records() : nullptr;
    }
    if (auto name = found ? found->method_name(method) : std::nullopt)
      return interpreted_frame(*name, options_.java_signatures);
  }
  // Only a JVM's unwinding marks its interpreter's frames; in any other process, such a frame
  // is an address no code has (a return address read from a stack gone wrong).
  if (auto image = images_.find(key); image == images_.end() || !image->second.jvm)
    return std::nullopt;
  return profile::Frame{"Interpreter", "", profile::FrameKind::kInterpreted};
}

bool HotSpotRuntime::wants_recapture(const ImageKey& key) const
{
  auto it = images_.find(key);
  return it != images_.end() && it->second.launcher;
}

void HotSpotRuntime::forget(const ImageKey& key, bool exited)
{
  images_.erase(key);
  if (exited)
    refused_.erase(key.pid);
  if (attacher_)
    attacher_->forget_if_gone(key.pid);
}

void HotSpotRuntime::poll(ProcessTable& processes)
{
  for (auto& [key, state] : images_) {
    if (!state.jvm)
      continue;
    PollPace& pace = state.pace;
    pace.read_at_last_poll = pace.polls_to_skip == 0;
    if (!pace.read_at_last_poll) {
      --pace.polls_to_skip;
      continue;
    }
    processes.read_perf_map(key);
    // What the map and the records read since the last poll brought.
    uint64_t changes = state.records ? state.records->file().changes() : 0;
    bool map_found = false;
    if (const auto* image = processes.find(key); image && image->perf_map) {
      changes += image->perf_map->file().changes();
      map_found = image->perf_map->file().found();
    }
    bool quiet = changes == pace.changes_seen;
    pace.changes_seen = changes;
    uint32_t most =
        map_found || state.keeps_perf_map ? kMostPollsSkipped : kMostPollsSkippedWithoutMap;
    pace.gap = quiet ? std::min(2 * pace.gap + 1, most) : 0;
    pace.polls_to_skip = pace.gap;
  }
}

const JvmRecords*
HotSpotRuntime::records(ProcessTable& processes, const ImageKey& key, bool read_now)
{
  const ProcessImage& image = processes.get(key);
  Image& state = images_[key];
  if (!state.records) {
    if (image.ns_pid == 0)
      return nullptr;
    state.records = std::make_shared<JvmRecordsReader>(key.pid, image.ns_pid, processes.proc_root(),
                                                       image.share);
  }
  bool new_generation = state.records_generation != processes.generation();
  if ((new_generation || read_now) && state.records_usable()) {
    state.records_generation = processes.generation();
    if (new_generation)
      state.records->begin_interval();
    // Quiet records are told on this thread, as perf maps are.
    if (state.records->file().quiet_at_a_glance())
      return &state.records->records();
    // As perf maps: the work holds the reader, and a stalled read leaves the frames unnamed.
    auto outcome = stall_guard_.run<bool>([reader = state.records] {
      reader->refresh();
      return true;
    });
    if (outcome && outcome->stalled) {
      state.records_stalled = outcome->result;
      warn_records_stalled(key.pid);
    }
  }
  return state.records_usable() ? &state.records->records() : nullptr;
}

std::vector<runtimes::CodeTable> HotSpotRuntime::take_code_tables(ProcessTable& processes)
{
  std::vector<runtimes::CodeTable> tables;
  std::vector<ImageKey> jvms;
  for (const auto& [key, state] : images_) {
    if (state.jvm && state.pace.read_at_last_poll)
      jvms.push_back(key);
  }
  for (const auto& key : jvms) {
    const JvmRecords* found = records(processes, key, true);
    if (!found)
      continue;
    Image& state = images_.at(key);
    JitTableDrops drops;
    auto table = state.jit_table.rebuild(*found, code_cache(processes.get(key)), &drops);
    if (!table)
      continue;
    if (drops.outside_code_cache > 0) {
      // The code cache may have grown since its maps were read: read them again, once per
      // generation, before calling the records garbage.
      const ProcessImage& current = processes.refresh(key);
      if (auto again = build_jit_table(*found, code_cache(current), &drops))
        table = std::move(again);
    }
    if (drops.total() > 0 && !state.jit_drops_reported) {
      spdlog::warn("unwind records of pid {}: {} code records dropped ({} with frames too large, "
                   "{} outside its code cache, {} over the table's budget); that code unwinds by "
                   "frame pointers",
                   key.pid, drops.total(), drops.frame_too_large, drops.outside_code_cache,
                   drops.over_budget);
      state.jit_drops_reported = true;
    }
    tables.push_back({key.pid, key.image_id, std::move(*table)});
  }
  return tables;
}

std::optional<symbolize::PerfMapTable::Entry> HotSpotRuntime::code_read_from_outside(
    ProcessTable& processes, const ImageKey& key, uint64_t address)
{
  const ProcessImage* image = processes.find(key);
  if (!image)
    return std::nullopt;
  Image& state = images_.at(key);
  if (state.code_generation != processes.generation()) {
    state.code_generation = processes.generation();
    state.found.clear();
    if (state.code)
      state.code->begin_interval();
  }
  if (auto found = state.found.find(address))
    return found;
  std::string about = fmt::format("JVM {} ({})", key.pid, image->comm);
  if (!state.code) {
    if (state.code_tried)
      return std::nullopt;
    state.code_tried = true;
    auto libjvm = std::find_if(image->code.begin(), image->code.end(), [](const MappedCode& code) {
      return code.mapping.file_backed() && code.mapping.path.ends_with("/libjvm.so");
    });
    if (libjvm == image->code.end())
      return std::nullopt;
    std::string shown_libjvm =
        processes.proc_root() + "/" + std::to_string(key.pid) + "/root" + libjvm->mapping.path;
    using Opened = Result<std::shared_ptr<HotSpotCode>>;
    auto outcome = stall_guard_.run<Opened>(
        [pid = key.pid, proc_root = processes.proc_root(), mapping = libjvm->mapping]() -> Opened {
          auto code = HotSpotCode::open(pid, proc_root, mapping);
          if (!code)
            return fail(code.error());
          return std::shared_ptr<HotSpotCode>(std::move(*code));
        });
    if (!outcome || outcome->stalled) {
      spdlog::warn("{}: the JIT code of process {} cannot be read from outside: reading it "
                   "stalls",
                   shown_libjvm, key.pid);
      return std::nullopt;
    }
    auto opened = outcome->result.get();
    if (!opened) {
      // A JVM that exited meanwhile is no trouble; one that runs is said once, whichever of its
      // images asked.
      bool gone = ::kill(static_cast<pid_t>(key.pid), 0) != 0 && errno == ESRCH;
      // Said of its libjvm.so: the JVM's own line is the attacher's.
      if (!gone && refused_.insert(key.pid).second)
        spdlog::warn("{}: the JIT code of process {} cannot be read from outside, so what its "
                     "perf map lacks stays unnamed: {}",
                     shown_libjvm, key.pid, opened.error().message);
      return std::nullopt;
    }
    state.code = std::move(*opened);
    spdlog::debug("{}: JIT frames its perf map lacks are named from outside, from HotSpot's code "
                  "cache",
                  about);
  }
  if (state.code->budget_spent())
    return std::nullopt;
  auto outcome = stall_guard_.run<std::optional<symbolize::PerfMapEntry>>(
      [code = state.code, address] { return code->find(address); });
  if (!outcome || outcome->stalled) {
    // A JVM whose memory cannot be read without stalling (userfaultfd) is not read again.
    if (outcome)
      spdlog::warn("process {} ({}): reading its memory stalls; its JIT frames are no longer read "
                   "from outside",
                   key.pid, image->comm);
    state.code.reset();
    return std::nullopt;
  }
  auto entry = outcome->result.get();
  if (!entry)
    return std::nullopt;
  state.found.insert(std::move(*entry));
  return state.found.find(address);
}

void HotSpotRuntime::before_naming(ProcessTable& processes)
{
  if (!attacher_)
    return;
  for (uint32_t pid : attacher_->take_rewritten_perf_maps())
    processes.reread_perf_map(pid);
}

void HotSpotRuntime::after_naming(ProcessTable& processes)
{
  (void)processes;
  if (attacher_) {
    for (uint32_t pid : unnamed_)
      attacher_->perf_map_lacks_code(pid);
  }
  // Their maps and records are read at the next poll.
  for (auto& [key, state] : images_) {
    if (unnamed_.contains(key.pid))
      state.pace = PollPace{};
  }
  unnamed_.clear();
}

void HotSpotRuntime::stop()
{
  if (!attacher_)
    return;
  using Clock = std::chrono::steady_clock;
  attacher_->wait_idle(Clock::now() + options_.attacher.timeout);
  if (!attacher_->stop(Clock::now() + std::chrono::seconds(1))) {
    spdlog::warn("attaching to a JVM is stuck on its file system; flamebpf exits without it");
    (void)attacher_.release();
  }
}

size_t HotSpotRuntime::jvms() const
{
  return std::count_if(images_.begin(), images_.end(),
                       [](const auto& entry) { return entry.second.jvm; });
}

} // namespace flamebpf::hotspot
