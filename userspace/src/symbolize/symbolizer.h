// The symbolize stage: turns a RawProfile's addresses into named frames.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <unordered_set>

#include "common/result.h"
#include "profile/raw_profile.h"
#include "profile/symbolized_profile.h"
#include "profile/target_names.h"
#include "symbolize/kernel_names.h"
#include "symbolize/late_names.h"
#include "symbolize/process_table.h"

namespace flamebpf::symbolize {

// The budgets of a symbolized profile, on what targets control: the names of their frames (their
// symbols and perf maps) and, through inlining, the number of frames. Where one cuts, a name ends
// in kTruncated, or a stack keeps its innermost frames under one kTruncated frame; the cuts are
// counted in the profile's SymbolizeStats and logged once per process. No real program meets
// them:
// A frame's name (and module): real names, even C++ templates, are well below this.
inline constexpr size_t kMaxFrameName = 8 * 1024;
// User frames per stack after inline expansion: the kernel gives at most 127, and Java's JIT
// inlines at most MaxInlineLevel (15) methods into each, so ~2,000 at most. (The kernel's own
// frames, at most 127, are named by the kernel.)
inline constexpr size_t kMaxStackFrames = 4096;
// Bytes of frame names (and modules) per stack: 4,096 frames of 256 bytes.
inline constexpr size_t kMaxStackNameBytes = 1 << 20;
// Bytes of frame names (and modules) per interval's profile, over all its stacks: a drain holds
// at most --count-storage (16,384 by default) distinct stacks, and a real one of ~100 frames of
// ~60 bytes each takes ~6 KB, so ~100 MB at the very most; stacks beyond keep only a kTruncated
// frame (and their counts).
inline constexpr size_t kMaxProfileNameBytes = 256 << 20;

struct SymbolizerOptions {
  bool java_signatures = false; // Java frames with their parameter types
  // The budgets above; tests make them smaller.
  size_t max_frame_name = kMaxFrameName;
  size_t max_stack_frames = kMaxStackFrames;
  size_t max_stack_name_bytes = kMaxStackNameBytes;
  size_t max_profile_name_bytes = kMaxProfileNameBytes;
  // Where debug files no debug root holds are fetched from; none if null.
  std::shared_ptr<DebugFetcher> debug_fetcher;
  // What targets make the symbolizer hold (perf maps, unwind records, ELF symbols) is charged
  // to their shares of this account; one of MemoryAccount::kDefaultTotalBytes if null.
  std::shared_ptr<MemoryAccount> memory;
};

class Symbolizer {
public:
  explicit Symbolizer(std::unique_ptr<KernelNames> kernel,
                      SymbolizerOptions options = {},
                      std::string proc_root = "/proc");

  // Records a process on its first sample, while it still runs: the name and cgroup2 id (0 if not
  // known) that sample was taken with.
  const ProcessImage&
  on_process_seen(const ImageKey& key, const std::string& comm, uint64_t cgroup_id = 0);
  // Reads what /proc says of a process now, for its capture later (on_process_seen, or its first
  // sample symbolized), which may come after it exited.
  void keep_snapshot(const ImageKey& key);

  // The runtimes (runtimes/runtime.h) asked first for code no ELF file holds, in this order.
  void add_runtime(std::unique_ptr<runtimes::Runtime> runtime)
  {
    processes_.add_runtime(std::move(runtime));
  }
  const std::vector<std::unique_ptr<runtimes::Runtime>>& runtimes() const
  {
    return processes_.runtimes();
  }

  // Names every frame of raw, and each stack's target from targets. Stacks come out root first:
  // user frames then kernel frames, within the budgets above. The runtimes are told before and
  // after.
  [[nodiscard]] Result<profile::SymbolizedProfile> symbolize(const profile::RawProfile& raw,
                                                             const profile::TargetNames& targets);

  // The JIT perf maps being read, for statistics.
  std::vector<PerfMapStatus> perf_maps() const { return processes_.perf_maps(); }

  // Between drains, as often as perf maps are read: each runtime reads what its images' files
  // appended.
  void poll_runtimes();
  // The unwind tables of runtimes' generated code that changed since the last call.
  std::vector<runtimes::CodeTable> take_code_tables();
  // The runtimes' walks of their images changed since the last call.
  std::vector<runtimes::ProcessWalk> take_process_walks();
  // The recording ends: each runtime's work under way gets a bounded time to finish.
  void stop_runtimes();

  // Processes remembered, ELF files held open and what their symbols take, for statistics.
  size_t processes() const { return processes_.size(); }
  // The process image if captured, without capturing it.
  const ProcessImage* find_process(const ImageKey& key) const { return processes_.find(key); }
  size_t elf_files() const { return processes_.elf_files(); }
  size_t symbol_tables() const { return processes_.symbol_tables(); }
  size_t symbol_bytes() const { return processes_.symbol_bytes(); }
  // The targets whose shares of the memory account processes seen from now on are charged to.
  void set_targets(profile::TargetNames targets) { processes_.set_targets(std::move(targets)); }
  const MemoryAccount& memory_account() const { return processes_.memory_account(); }

  // Names again the frames of profile that were named incompletely (late_names.h) from what
  // arrived since (debug files, symbols, inline indexes, perf maps and runtimes' records), waiting
  // up to wait_until for the inline indexes its frames wait for, before profile is written: its
  // frames are final then, and stacks that read alike are merged.
  void name_late(profile::SymbolizedProfile& profile,
                 std::chrono::steady_clock::time_point wait_until = {});
  // Forgets the frames to be named again: profiles symbolized so far are written.
  void forget_late_frames();
  size_t late_frames() const { return late_.size(); }

  // Forgets processes that exited; returns their pids so the sampler can forget them too.
  std::vector<ImageKey> forget_exited_processes();

private:
  profile::Frame kernel_frame(uint64_t address) const;
  // Appends the frames of one user address: one, or several for JIT code with inlined methods,
  // each name within its budget; notes build IDs, what could not be named and what a budget cut
  // in profile. True if the budget of an inline chain left out some of its methods.
  bool add_user_frames(const ImageKey& key,
                       uint64_t address,
                       std::vector<profile::Frame>& out,
                       profile::SymbolizedProfile& profile);
  // The frame of a marker a runtime's unwinding left (FB_FRAME_RUNTIME_MARKER), named by the
  // runtime. Never a code address, so never moved back to a call site.
  profile::Frame marker_frame(const ImageKey& key, uint64_t frame);
  // The frames of code no ELF file holds, from the runtimes, else from the process's perf map;
  // nullopt if nothing names it.
  std::optional<runtimes::NamedCode>
  name_generated_code(const ImageKey& key, uint64_t address, bool anonymous);
  // add_user_frames without the budget on names; sets *cut_when_read if the perf map's reader
  // cut the name.
  bool name_user_address(const ImageKey& key,
                         uint64_t address,
                         std::vector<profile::Frame>& out,
                         profile::SymbolizedProfile& profile,
                         bool* cut_when_read);
  // The user frames of sample, root first, within the stack's budgets (max_stack_frames, and
  // max_stack_name_bytes). Adds the bytes of names they hold to *bytes, and sets *cut if frames
  // were left out.
  std::vector<profile::Frame> user_frames(const profile::RawSample& sample,
                                          size_t* bytes,
                                          bool* cut,
                                          profile::SymbolizedProfile& profile);
  // Cuts the names of out[first..] to their budget, counting them (and the cut_when_read ones)
  // in profile.
  void cut_names(const ImageKey& key,
                 std::vector<profile::Frame>& out,
                 size_t first,
                 bool cut_when_read,
                 profile::SymbolizedProfile& profile);
  // Appends the frames of a symbol matched in the file at path: the function, then the functions
  // inlined into it. True if a budget cut a name when it was read.
  bool add_native_frames(const ImageKey& key,
                         ElfSymbols::SymbolMatch match,
                         const std::string& path,
                         uint64_t file_offset,
                         std::vector<profile::Frame>& out,
                         profile::SymbolizedProfile& profile);
  // The frames a late frame (late_names.h) has now, if they read otherwise than it.
  std::optional<std::vector<profile::Frame>> name_again(const profile::Frame& frame,
                                                        profile::SymbolizedProfile& profile);
  // Says how to name the code of files left unnamed, once for each file.
  void say_unnamed_files(const std::set<std::string>& files);
  // Says once per process that a budget cut one of its stacks or names.
  void report_cut(const ImageKey& key, const std::string& what);

  std::unique_ptr<KernelNames> kernel_;
  SymbolizerOptions options_;
  ProcessTable processes_;
  // Processes whose cut was said (see report_cut); forgotten with them.
  std::unordered_set<ImageKey, ImageKeyHash> cuts_reported_;
  LateFrames late_;
  // Files whose unnamed code was said (say_unnamed_files); at most kMaxUnnamedFilesSaid.
  std::unordered_set<std::string> unnamed_files_said_;
  static constexpr size_t kMaxUnnamedFilesSaid = 4096;
};

} // namespace flamebpf::symbolize
