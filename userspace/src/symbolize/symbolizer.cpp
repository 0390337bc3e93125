#include "symbolize/symbolizer.h"

#include <fmt/format.h>

#include "symbolize/java_frames.h"

namespace flamebpf::symbolize {
namespace {

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

} // namespace

Symbolizer::Symbolizer(std::unique_ptr<KernelNames> kernel,
                       SymbolizerOptions options,
                       std::string proc_root)
    : kernel_(std::move(kernel)), options_(options), processes_(std::move(proc_root))
{
}

const ProcessImage& Symbolizer::on_process_seen(const ImageKey& key, const std::string& comm)
{
  processes_.capture(key, comm);
  return processes_.get(key);
}

std::vector<JvmFound> Symbolizer::take_new_jvms()
{
  std::vector<JvmFound> found;
  for (const auto& key : processes_.take_new_jvms()) {
    if (const ProcessImage* image = processes_.find(key))
      found.push_back({key, image->keeps_perf_map, image->cgroup});
  }
  return found;
}

profile::Frame Symbolizer::kernel_frame(uint64_t address) const
{
  auto symbol = kernel_->lookup(address);
  if (!symbol)
    return {"[unknown]", "", profile::FrameKind::kUnknown};
  return {std::string(symbol->name), std::string(symbol->module), profile::FrameKind::kKernel};
}

void Symbolizer::add_user_frames(const ImageKey& key,
                                 uint64_t address,
                                 std::vector<profile::Frame>& out,
                                 profile::SymbolizedProfile& profile)
{
  auto& stats = profile.symbolize_stats;
  const MappedCode* code = processes_.get(key).find(address);
  if (!code)
    code = processes_.refresh(key).find(address); // code mapped after the process was captured
  if (!code || !code->mapping.file_backed()) {
    // Anonymous code is a JIT's: its perf map names it.
    bool anonymous_code = code && code->mapping.path.empty();
    stats.jit_frames += anonymous_code;
    if (const PerfMapTable* map = processes_.perf_map(key)) {
      if (auto entry = map->find(address)) {
        auto frames = perf_map_frames(entry->name, options_.java_signatures);
        out.insert(out.end(), std::make_move_iterator(frames.begin()),
                   std::make_move_iterator(frames.end()));
        stats.jit_frames += !anonymous_code; // a map that names code outside any mapping
        return;
      }
    }
    stats.jit_unnamed += anonymous_code;
  }
  if (!code) {
    out.push_back({"[unknown]", "", profile::FrameKind::kUnknown});
    return;
  }
  const Mapping& mapping = code->mapping;
  uint64_t file_offset = address - mapping.start + mapping.offset;
  stats.native_frames += mapping.file_backed();
  if (code->symbols) {
    if (!code->symbols->build_id().empty())
      profile.build_ids.try_emplace(mapping.path, code->symbols->build_id());
    if (auto name = code->symbols->symbolize_file_offset(file_offset)) {
      out.push_back({*name, mapping.path, profile::FrameKind::kNative});
      return;
    }
  }
  stats.native_unnamed += mapping.file_backed();
  if (mapping.path.empty())
    out.push_back({"[unknown]", "", profile::FrameKind::kUnknown});
  else if (!mapping.file_backed())
    out.push_back({mapping.path, "", profile::FrameKind::kUnknown}); // [vdso], [vsyscall]
  else
    out.push_back({fmt::format("{}+0x{:x}", basename_of(mapping.path), file_offset), mapping.path,
                   profile::FrameKind::kUnknown});
}

Result<profile::SymbolizedProfile> Symbolizer::symbolize(const profile::RawProfile& raw,
                                                         const profile::TargetNames& targets)
{
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
  for (const auto& sample : raw.samples) {
    profile::Stack stack;
    stack.pid = sample.tgid;
    stack.count = sample.count;
    ImageKey key{sample.tgid, sample.image_id};
    stack.comm = processes_.get(key).comm;
    stack.target = profile::target_of(targets, sample.target_cgroup_id, sample.tgid,
                                      processes_.get(key).cgroup);
    auto& frames = stack.frames;
    frames.reserve(sample.user_frames.size() + sample.kernel_frames.size() + 2);
    if (sample.user_stack_lost)
      frames.push_back({"[user stack lost]", "", profile::FrameKind::kUnknown});
    for (size_t i = sample.user_frames.size(); i-- > 0;)
      add_user_frames(key, call_site(sample.user_frames[i], i == 0), frames, out);
    if (sample.kernel_stack_lost)
      frames.push_back({"[kernel stack lost]", "", profile::FrameKind::kKernel});
    for (size_t i = sample.kernel_frames.size(); i-- > 0;)
      frames.push_back(kernel_frame(call_site(sample.kernel_frames[i], i == 0)));
    out.stacks.push_back(std::move(stack));
  }
  return out;
}

std::vector<ImageKey> Symbolizer::forget_exited_processes()
{
  return processes_.end_generation();
}

} // namespace flamebpf::symbolize
