#include "symbolize/symbolizer.h"

#include <algorithm>
#include <fmt/format.h>
#include <set>
#include <thread>
#include <unordered_map>

#include "bpf_abi.h"
#include "common/log.h"
#include "common/meanwhile.h"
#include "common/proc_maps.h"
#include "profile/accumulator.h"
#include "symbolize/name_cut.h"
#include "symbolize/perf_map_names.h"

namespace flamebpf::symbolize {
namespace {

// The vDSO's functions (clock_gettime, gettimeofday: a Go or Java program's clock reads), named
// from flamebpf's own vDSO, the same image in every 64-bit process on this kernel; a mapping of
// another size (a 32-bit process's) is not named from it.
const ElfSymbols* vdso_symbols(const procfs::Mapping& mapping)
{
  static const std::unique_ptr<ElfSymbols> own = []() -> std::unique_ptr<ElfSymbols> {
    std::string_view image = procfs::own_vdso_image();
    if (image.empty())
      return nullptr;
    auto read = ElfSymbols::read_image(image, "[vdso]");
    return read ? std::move(*read) : nullptr;
  }();
  if (!own || mapping.end - mapping.start != procfs::own_vdso_image().size())
    return nullptr;
  return own.get();
}

std::string basename_of(const std::string& path)
{
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Frames other than the innermost are return addresses; the call is the byte before.
uint64_t call_site(uint64_t address, bool innermost)
{
  return innermost || address == 0 ? address : address - 1;
}

profile::Frame truncated_frame()
{
  return {std::string(kTruncated), "", profile::FrameKind::kUnknown};
}

size_t name_bytes(const profile::Frame& frame)
{
  return frame.name.size() + frame.module.size();
}

} // namespace

Symbolizer::Symbolizer(std::unique_ptr<KernelNames> kernel,
                       SymbolizerOptions options,
                       std::string proc_root)
    : kernel_(std::move(kernel)), options_(options),
      processes_(std::move(proc_root), options_.memory)
{
  if (options_.debug_fetcher)
    processes_.fetch_debug_files_with(options_.debug_fetcher);
}

const ProcessImage&
Symbolizer::on_process_seen(const ImageKey& key, const std::string& comm, uint64_t cgroup_id)
{
  processes_.capture(key, comm, cgroup_id);
  return processes_.get(key);
}

void Symbolizer::keep_snapshot(const ImageKey& key)
{
  processes_.keep_snapshot(key);
}

profile::Frame Symbolizer::kernel_frame(uint64_t address) const
{
  auto symbol = kernel_->lookup(address);
  if (!symbol)
    return {"[unknown]", "", profile::FrameKind::kUnknown};
  return {std::string(symbol->name), std::string(symbol->module), profile::FrameKind::kKernel};
}

void Symbolizer::report_cut(const ImageKey& key, const std::string& what)
{
  if (cuts_reported_.insert(key).second)
    spdlog::warn("pid {}: {}; {} marks the cut, and later cuts are only counted", key.pid, what,
                 kTruncated);
}

bool Symbolizer::add_user_frames(const ImageKey& key,
                                 uint64_t address,
                                 std::vector<profile::Frame>& out,
                                 profile::SymbolizedProfile& profile)
{
  size_t first = out.size();
  bool cut_when_read = false;
  bool dropped = name_user_address(key, address, out, profile, &cut_when_read);
  cut_names(key, out, first, cut_when_read, profile);
  return dropped;
}

void Symbolizer::cut_names(const ImageKey& key,
                           std::vector<profile::Frame>& out,
                           size_t first,
                           bool cut_when_read,
                           profile::SymbolizedProfile& profile)
{
  // Names (and modules) the target chose, each within its budget.
  uint64_t cut = 0;
  for (size_t i = first; i < out.size(); ++i) {
    bool frame_cut = false;
    for (std::string* text : {&out[i].name, &out[i].module}) {
      if (text->size() <= options_.max_frame_name)
        continue;
      *text = cut_name(*text, options_.max_frame_name);
      frame_cut = true;
    }
    cut += frame_cut;
  }
  if (cut > 0)
    report_cut(key, fmt::format("a frame name longer than {} bytes", options_.max_frame_name));
  // A name the perf map's reader cut, and cut again here, is one cut name.
  profile.symbolize_stats.truncated_names += std::max<uint64_t>(cut, cut_when_read);
}

profile::Frame Symbolizer::marker_frame(const ImageKey& key, uint64_t frame)
{
  for (const auto& runtime : processes_.runtimes()) {
    if (auto named = runtime->name_marker(processes_, key, frame))
      return std::move(*named);
  }
  return {"[unknown]", "", profile::FrameKind::kUnknown};
}

std::optional<runtimes::NamedCode>
Symbolizer::name_generated_code(const ImageKey& key, uint64_t address, bool anonymous)
{
  for (const auto& runtime : processes_.runtimes()) {
    if (auto named = runtime->name_code(processes_, key, address, anonymous)) {
      if (named->frames.empty())
        return std::nullopt; // the runtime's, and unnamed: its perf map was read already
      return named;
    }
  }
  if (auto entry = processes_.perf_map_entry(key, address))
    return perf_map_code(*entry, options_.java_signatures);
  return std::nullopt;
}

void Symbolizer::poll_runtimes()
{
  for (const auto& runtime : processes_.runtimes())
    runtime->poll(processes_);
}

std::vector<runtimes::CodeTable> Symbolizer::take_code_tables()
{
  std::vector<runtimes::CodeTable> tables;
  for (const auto& runtime : processes_.runtimes()) {
    auto changed = runtime->take_code_tables(processes_);
    tables.insert(tables.end(), std::make_move_iterator(changed.begin()),
                  std::make_move_iterator(changed.end()));
  }
  return tables;
}

std::vector<runtimes::ProcessWalk> Symbolizer::take_process_walks()
{
  std::vector<runtimes::ProcessWalk> walks;
  for (const auto& runtime : processes_.runtimes()) {
    auto changed = runtime->take_process_walks();
    walks.insert(walks.end(), changed.begin(), changed.end());
  }
  return walks;
}

void Symbolizer::stop_runtimes()
{
  for (const auto& runtime : processes_.runtimes())
    runtime->stop();
}

bool Symbolizer::name_user_address(const ImageKey& key,
                                   uint64_t address,
                                   std::vector<profile::Frame>& out,
                                   profile::SymbolizedProfile& profile,
                                   bool* cut_when_read)
{
  auto& stats = profile.symbolize_stats;
  const MappedCode* code = processes_.get(key).find(address);
  if (!code)
    code = processes_.refresh(key).find(address); // code mapped after the process was captured
  if (!code || !code->mapping.file_backed()) {
    // Anonymous code is a JIT's: a runtime, or its perf map, names it.
    bool anonymous_code = code && code->mapping.path.empty();
    stats.jit_frames += anonymous_code;
    if (auto named = name_generated_code(key, address, anonymous_code)) {
      out.insert(out.end(), std::make_move_iterator(named->frames.begin()),
                 std::make_move_iterator(named->frames.end()));
      stats.jit_frames += !anonymous_code; // a map that names code outside any mapping
      *cut_when_read = named->cut_when_read;
      if (named->dropped > 0)
        report_cut(key, fmt::format("an inline chain of more than {} methods", kMaxInlineFrames));
      return named->dropped > 0;
    }
    stats.jit_unnamed += anonymous_code;
  }
  if (!code) {
    out.push_back({"[unknown]", "", profile::FrameKind::kUnknown});
    return false;
  }
  if (code->mapping.path.empty()) {
    // A JIT's code whose perf map or records may name it later.
    profile::Frame frame{"[unknown]", "", profile::FrameKind::kUnknown};
    frame.late = late_.note(key, address);
    out.push_back(std::move(frame));
    return false;
  }
  const procfs::Mapping& mapping = code->mapping;
  uint64_t file_offset = address - mapping.start + mapping.offset;
  stats.native_frames += mapping.file_backed();
  const ElfSymbols* symbols = processes_.symbols_of(key, *code);
  if (symbols) {
    if (!symbols->build_id().empty())
      profile.build_ids.try_emplace(mapping.path, symbols->build_id());
    if (auto match = symbols->match_file_offset(file_offset, processes_.name_guard())) {
      size_t first = out.size();
      *cut_when_read =
          add_native_frames(key, std::move(*match), mapping.path, file_offset, out, profile);
      if (symbols->inlines_pending())
        out[first].late = late_.note(key, address, code->symbols, file_offset);
      return false;
    }
  }
  if (mapping.path == "[vdso]") {
    if (const ElfSymbols* vdso = vdso_symbols(mapping)) {
      if (auto match = vdso->match_file_offset(file_offset)) {
        *cut_when_read =
            add_native_frames(key, std::move(*match), mapping.path, file_offset, out, profile);
        return false;
      }
    }
  }
  stats.native_unnamed += mapping.file_backed();
  if (!mapping.file_backed()) {
    out.push_back({mapping.path, "", profile::FrameKind::kUnknown}); // [vdso], [vsyscall]
    return false;
  }
  // Its symbols or debug file may arrive later; until then the file and offset name it.
  profile::Frame frame{fmt::format("{}+0x{:x}", basename_of(mapping.path), file_offset),
                       mapping.path, profile::FrameKind::kUnknown};
  frame.file_offset = file_offset;
  frame.late = late_.note(key, address, code->symbols, file_offset);
  out.push_back(std::move(frame));
  return false;
}

bool Symbolizer::add_native_frames(const ImageKey& key,
                                   ElfSymbols::SymbolMatch match,
                                   const std::string& path,
                                   uint64_t file_offset,
                                   std::vector<profile::Frame>& out,
                                   profile::SymbolizedProfile& profile)
{
  // A symbol name the ELF reader or the demangler cut (kMaxSymbolNameBytes, kMaxDemangledBytes)
  // counts as a cut name too.
  bool cut = match.cut;
  if (match.cut)
    report_cut(key, "a symbol name longer than its budget");
  profile::Frame function{std::move(match.name), path, profile::FrameKind::kNative};
  function.file_offset = file_offset - match.offset;
  out.push_back(std::move(function));
  profile.symbolize_stats.native_inlined_frames += match.inlined.size();
  for (const auto& inlined : match.inlined) {
    cut |= inlined.cut;
    out.push_back({std::string(inlined.name), path, profile::FrameKind::kInlined});
  }
  return cut;
}

std::vector<profile::Frame> Symbolizer::user_frames(const profile::RawSample& sample,
                                                    size_t* bytes,
                                                    bool* cut,
                                                    profile::SymbolizedProfile& profile)
{
  ImageKey key{sample.tgid, sample.image_id};
  // Innermost first, so that a cut keeps the frames nearest the leaf, where the time went, and
  // drops those nearest the root; one frame of the budget is the cut's mark.
  size_t room = options_.max_stack_frames > 0 ? options_.max_stack_frames - 1 : 0;
  std::vector<profile::Frame> inner_first;
  std::vector<profile::Frame> group;
  size_t used = 0;
  std::string full; // which budget ran out
  for (size_t i = 0; i < sample.user_frames.size() && full.empty(); ++i) {
    group.clear();
    uint64_t address = sample.user_frames[i];
    if (address & FB_FRAME_RUNTIME_MARKER)
      group.push_back(marker_frame(key, address)); // no code address
    else
      *cut |= add_user_frames(key, call_site(address, i == 0), group, profile);
    for (auto frame = group.rbegin(); frame != group.rend(); ++frame) {
      if (inner_first.size() >= room) {
        full = fmt::format("{} frames (after inline expansion)", options_.max_stack_frames);
        break;
      }
      if (used + name_bytes(*frame) > options_.max_stack_name_bytes) {
        full = fmt::format("{} bytes of names", options_.max_stack_name_bytes);
        break;
      }
      used += name_bytes(*frame);
      inner_first.push_back(std::move(*frame));
    }
  }
  if (!full.empty()) {
    *cut = true;
    report_cut(key, "a stack of more than " + full);
    inner_first.push_back(truncated_frame());
    used += kTruncated.size();
  }
  std::reverse(inner_first.begin(), inner_first.end());
  *bytes += used;
  return inner_first;
}

Result<profile::SymbolizedProfile> Symbolizer::symbolize(const profile::RawProfile& raw,
                                                         const profile::TargetNames& targets)
{
  for (const auto& runtime : processes_.runtimes())
    runtime->before_naming(processes_);
  profile::SymbolizedProfile out;
  out.start = raw.start;
  out.end = raw.end;
  out.counters = raw.counters;
  out.stacks.reserve(raw.samples.size());
  std::vector<uint64_t> kernel_addresses;
  for (const auto& sample : raw.samples) {
    for (size_t i = 0; i < sample.kernel_frames.size(); ++i)
      kernel_addresses.push_back(call_site(sample.kernel_frames[i], i == 0));
  }
  kernel_->prepare(kernel_addresses);
  size_t profile_bytes = 0;
  for (const auto& sample : raw.samples) {
    meanwhile::run_if_due(); // a large interval takes a while
    profile::Stack stack;
    stack.pid = sample.tgid;
    stack.count = sample.count;
    ImageKey key{sample.tgid, sample.image_id};
    // One captured inside execve has its name and code read again first: the old program's name
    // must not stay on the new one's samples.
    const ProcessImage* captured = &processes_.get(key);
    if (captured->captured_mid_exec)
      captured = &processes_.refresh(key);
    const ProcessImage& image = *captured;
    stack.comm = image.comm;
    stack.target = profile::target_of(targets, sample.target_cgroup_id, sample.tgid,
                                      {image.cgroup, image.cgroup_id});
    stack.pod_container_id = profile::pod_container_of(targets, image.cgroup);
    size_t bytes = 0;
    bool cut = false;
    auto user = user_frames(sample, &bytes, &cut, out);
    auto& frames = stack.frames;
    frames.reserve(user.size() + sample.kernel_frames.size() + 2);
    if (sample.user_stack_lost)
      frames.push_back({"[user stack lost]", "", profile::FrameKind::kUnknown});
    frames.insert(frames.end(), std::make_move_iterator(user.begin()),
                  std::make_move_iterator(user.end()));
    if (sample.kernel_stack_lost)
      frames.push_back({"[kernel stack lost]", "", profile::FrameKind::kKernel});
    for (size_t i = sample.kernel_frames.size(); i-- > 0;) {
      frames.push_back(kernel_frame(call_site(sample.kernel_frames[i], i == 0)));
      bytes += name_bytes(frames.back());
    }
    if (profile_bytes + bytes > options_.max_profile_name_bytes) {
      // The interval holds all the names it may: the stack keeps its count, not its frames.
      cut = true;
      report_cut(key, fmt::format("the interval's stacks hold {} bytes of names",
                                  options_.max_profile_name_bytes));
      frames = {truncated_frame()};
      bytes = kTruncated.size();
    }
    profile_bytes += bytes;
    out.symbolize_stats.truncated_stacks += cut;
    bool lost = sample.user_stack_lost || sample.kernel_stack_lost;
    stack.lost_samples = lost ? sample.count : 0;
    stack.cut_samples = !lost && (cut || sample.user_stack_cut) ? sample.count : 0;
    out.stacks.push_back(std::move(stack));
  }
  for (const auto& runtime : processes_.runtimes())
    runtime->after_naming(processes_);
  return out;
}

std::optional<std::vector<profile::Frame>>
Symbolizer::name_again(const profile::Frame& frame, profile::SymbolizedProfile& profile)
{
  const LateFrames::Entry* entry = late_.find(frame.late);
  if (!entry)
    return std::nullopt;
  std::vector<profile::Frame> frames;
  if (processes_.find(entry->image)) {
    add_user_frames(entry->image, entry->address, frames, profile);
  } else if (auto symbols = entry->symbols.lock()) {
    // The process exited: its file's symbols, as they stand, name it.
    auto match = symbols->match_file_offset(entry->file_offset, processes_.name_guard());
    if (!match)
      return std::nullopt;
    bool cut = add_native_frames(entry->image, std::move(*match), frame.module, entry->file_offset,
                                 frames, profile);
    cut_names(entry->image, frames, 0, cut, profile);
  }
  if (frames.empty() || (frames.size() == 1 && frames.front() == frame))
    return std::nullopt; // nothing new: it stays as it was
  return frames;
}

void Symbolizer::name_late(profile::SymbolizedProfile& profile,
                           std::chrono::steady_clock::time_point wait_until)
{
  processes_.take_arrivals();
  // Only the indexes that frames of the profile wait for are waited for, at the caller's priority.
  if (std::chrono::steady_clock::now() < wait_until && processes_.inline_builds_pending() > 0 &&
      late_.awaits_inlines())
    processes_.hurry_inline_builds();
  while (std::chrono::steady_clock::now() < wait_until && processes_.inline_builds_pending() > 0 &&
         late_.awaits_inlines()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    processes_.take_arrivals();
  }
  if (late_.size() == 0)
    return;
  for (const auto& runtime : processes_.runtimes())
    runtime->before_naming(processes_);
  // Each frame is named again once, whatever the number of stacks that hold it.
  std::unordered_map<uint32_t, std::optional<std::vector<profile::Frame>>> named_again;
  // What naming again counts is not the interval's: only the changes below are.
  profile::SymbolizedProfile scratch;
  auto& stats = profile.symbolize_stats;
  bool any_late = false;
  std::set<std::string> unnamed_files;
  for (auto& stack : profile.stacks) {
    if (std::none_of(stack.frames.begin(), stack.frames.end(),
                     [](const profile::Frame& frame) { return frame.late != 0; }))
      continue;
    any_late = true;
    std::vector<profile::Frame> frames;
    frames.reserve(stack.frames.size());
    bool changed = false;
    profile::SymbolizeStats named_now; // frames no longer unnamed, inlined functions found
    for (const auto& frame : stack.frames) {
      if (frame.late == 0) {
        frames.push_back(frame);
        continue;
      }
      auto [found, first] = named_again.try_emplace(frame.late);
      if (first)
        found->second = name_again(frame, scratch);
      if (!found->second) {
        frames.push_back(frame);
        continue;
      }
      const auto& better = *found->second;
      frames.insert(frames.end(), better.begin(), better.end());
      changed = true;
      // Each stack counted its frames as it was symbolized: the frame it held is one fewer
      // unnamed, and its inlined functions more.
      if (frame.kind == profile::FrameKind::kUnknown &&
          better.front().kind != profile::FrameKind::kUnknown)
        ++(frame.module.empty() ? named_now.jit_unnamed : named_now.native_unnamed);
      named_now.native_inlined_frames +=
          std::count_if(better.begin(), better.end(), [](const profile::Frame& named) {
            return named.kind == profile::FrameKind::kInlined;
          });
    }
    // Inlined functions found now may not take the stack past its budgets.
    size_t bytes = 0;
    for (const auto& frame : frames)
      bytes += name_bytes(frame);
    if (changed && frames.size() <= options_.max_stack_frames &&
        bytes <= options_.max_stack_name_bytes) {
      stack.frames = std::move(frames);
      stats.jit_unnamed -= std::min(stats.jit_unnamed, named_now.jit_unnamed);
      stats.native_unnamed -= std::min(stats.native_unnamed, named_now.native_unnamed);
      stats.native_inlined_frames += named_now.native_inlined_frames;
    }
    // The profile is written now: its frames are final.
    for (auto& frame : stack.frames) {
      frame.late = 0;
      if (frame.kind == profile::FrameKind::kUnknown && frame.file_offset != 0)
        unnamed_files.insert(frame.module);
    }
  }
  say_unnamed_files(unnamed_files);
  for (const auto& runtime : processes_.runtimes())
    runtime->after_naming(processes_);
  profile.build_ids.merge(scratch.build_ids);
  if (!any_late)
    return;
  // Stacks that read alike now (a frame named now, or unnamed code at two addresses) are one.
  profile::Accumulator merged;
  merged.add(std::move(profile));
  profile = merged.take();
}

void Symbolizer::say_unnamed_files(const std::set<std::string>& files)
{
  // One line for the files whose code was left unnamed, each said once: what a user can do about
  // it (a stripped library's debug file, as distributions package them), not each frame.
  std::vector<std::string> new_files;
  for (const auto& file : files) {
    if (unnamed_files_said_.size() >= kMaxUnnamedFilesSaid)
      break;
    if (unnamed_files_said_.insert(file).second)
      new_files.push_back(file);
  }
  if (new_files.empty())
    return;
  constexpr size_t kNamed = 4;
  std::string listed;
  for (size_t i = 0; i < new_files.size() && i < kNamed; ++i)
    listed += (i ? ", " : "") + basename_of(new_files[i]);
  if (new_files.size() > kNamed)
    listed += fmt::format(" and {} more", new_files.size() - kNamed);
  spdlog::info("code in {} has no symbols, and its frames read file+offset: its debug files "
               "(the distribution's debug packages, e.g. libc6-dbg) or a debuginfod server "
               "(--debuginfod) name it",
               listed);
}

void Symbolizer::forget_late_frames()
{
  late_.clear();
}

std::vector<ImageKey> Symbolizer::forget_exited_processes()
{
  auto gone = processes_.end_generation();
  for (const auto& key : gone)
    cuts_reported_.erase(key);
  return gone;
}

} // namespace flamebpf::symbolize
