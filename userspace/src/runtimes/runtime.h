// A language runtime whose code flamebpf names and unwinds from what the process keeps beside its
// ELF files: the maps a JIT writes, the runtime's own structures read from outside, the records of
// an agent loaded into it. Each runtime is one folder behind this interface, and runtimes.h lists
// them; the symbolizer asks them first for code no ELF file holds and knows none by name, and the
// recorder loops over them. The shape is the OpenTelemetry profiler's interpreter loaders: a
// runtime recognizes an image when it is captured, keeps what it learns per image, names frames,
// gives unwind tables for its generated code, does its work around each drain, and forgets.
//
// Everything a runtime reads of a target is hostile: the same budgets, stall guards and one line
// per problem as the rest of flamebpf.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "common/proc_maps.h"
#include "profile/symbolized_profile.h"
#include "runtimes/cpython_abi.h"
#include "unwind/unwind_table.h"

namespace flamebpf::symbolize {
class ProcessTable;
struct ProcessImage;
struct ImageKey;
} // namespace flamebpf::symbolize

namespace flamebpf::runtimes {

using symbolize::ImageKey;
using symbolize::ProcessImage;
using symbolize::ProcessTable;

// The frames a runtime gives one address.
struct NamedCode {
  std::vector<profile::Frame> frames; // outermost first (a method, then those inlined into it)
  bool cut_when_read = false;         // a name was cut to its budget where it was read
  uint64_t dropped = 0;               // frames left out beyond the runtime's own budget
};

// An unwind table a runtime built for its generated code in one image, for the sampler.
struct CodeTable {
  uint32_t pid = 0;
  uint32_t image_id = 0;
  unwind::UnwindTable table;
};

// What the unwinder reads of a runtime in one image to walk its frames (a CPython's thread and
// frame layout); none: the image no longer has it.
struct ProcessWalk {
  uint32_t pid = 0;
  uint32_t image_id = 0;
  std::optional<fb_cpython_process> cpython;
};

class Runtime {
public:
  virtual ~Runtime() = default;

  // For messages: "HotSpot", "Node.js".
  virtual std::string_view name() const = 0;

  // key's image was captured, or captured again (its maps read anew): mappings are all of them.
  // The runtime finds whether it runs there and opens what must be opened while the process
  // lives.
  virtual void captured(ProcessTable& processes,
                        const ImageKey& key,
                        const ProcessImage& image,
                        const std::vector<procfs::Mapping>& mappings) = 0;

  // Frames for address in key's image, where no ELF file holds code (anonymous: JIT code; or no
  // mapping at all); nullopt if the runtime does not run there. No frames: it runs there and
  // nothing it reads names the address, which the symbolizer then looks for nowhere else.
  virtual std::optional<NamedCode>
  name_code(ProcessTable& processes, const ImageKey& key, uint64_t address, bool anonymous) = 0;

  // A user frame the unwinder marked as a runtime's (bpf_abi.h: FB_FRAME_RUNTIME_MARKER), no code
  // address; nullopt if it is not this runtime's.
  virtual std::optional<profile::Frame>
  name_marker(ProcessTable& processes, const ImageKey& key, uint64_t frame)
  {
    (void)processes, (void)key, (void)frame;
    return std::nullopt;
  }

  // Whether key's image, the newest of its process, should have its maps read again at the end of
  // a generation even if no sample meets it (a launcher that loads the runtime later).
  virtual bool wants_recapture(const ImageKey& key) const
  {
    (void)key;
    return false;
  }

  // Forgets key's image, replaced by an exec or (exited) gone with its process.
  virtual void forget(const ImageKey& key, bool exited) = 0;

  // Between drains, as often as perf maps are read: reads what its images' files appended.
  virtual void poll(ProcessTable& processes) { (void)processes; }

  // The unwind tables of generated code that changed since the last call (as often as poll).
  virtual std::vector<CodeTable> take_code_tables(ProcessTable& processes)
  {
    (void)processes;
    return {};
  }

  // The walks of its images that changed since the last call (as often as poll).
  virtual std::vector<ProcessWalk> take_process_walks() { return {}; }

  // Before a drain's frames are named: what its helpers learned since (a map rewritten in place).
  virtual void before_naming(ProcessTable& processes) { (void)processes; }

  // After a drain's frames were named: the work they asked for (code left unnamed).
  virtual void after_naming(ProcessTable& processes) { (void)processes; }

  // The recording ends: work under way gets a bounded time to finish.
  virtual void stop() {}
};

} // namespace flamebpf::runtimes
