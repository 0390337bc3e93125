// Plain data leaving the symbolize stage: named frames, ready for any emitter.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "profile/drop_counters.h"

namespace flamebpf::profile {

enum class FrameKind : uint8_t {
  kKernel,      // from /proc/kallsyms
  kNative,      // from an ELF file's symbols, or JIT code that is no Java method (stubs)
  kUnknown,     // unresolved: shown as "[unknown]" or "module+0xoffset"
  kJit,         // a JIT-compiled Java method, from a perf map
  kInlined,     // a function inlined into the frame before it: by the JIT (Java) or the compiler
  kInterpreted, // a method run by a runtime's interpreter, named by that runtime (runtimes/)
};

struct Frame {
  std::string name;   // function name, or the unresolved form
  std::string module; // kernel module, or path of the ELF file; empty if none
  FrameKind kind = FrameKind::kUnknown;
  // Where the code is in module, an ELF file: the unnamed byte's offset in the file, or the
  // named function's start; for pprof's readers, which may name what flamebpf could not. 0 if
  // not known.
  uint64_t file_offset = 0;
  // A frame that may be named better later (symbolize/late_names.h): its number there; 0 if final.
  uint32_t late = 0;
  // The source line an interpreted frame was at when sampled, which pprof keeps (Line.line); 0 if
  // not known. Its name says the function's first line: folded stacks, flame graphs and top show
  // one frame per function, whatever line its time was spent at.
  uint32_t line = 0;

  // A frame is what it reads, and where pprof puts it: where it was found, and whether it may be
  // named later, do not make two frames of one.
  friend bool operator==(const Frame& a, const Frame& b)
  {
    return a.kind == b.kind && a.name == b.name && a.module == b.module && a.line == b.line;
  }
  friend auto operator<=>(const Frame& a, const Frame& b)
  {
    if (auto order = a.name <=> b.name; order != 0)
      return order;
    if (auto order = a.module <=> b.module; order != 0)
      return order;
    if (auto order = a.kind <=> b.kind; order != 0)
      return order;
    return a.line <=> b.line;
  }
};

// One distinct stack of one process with its sample count.
struct Stack {
  uint32_t pid = 0;          // host pid
  std::string comm;          // process name: the root frame of the flame graph
  std::string target;        // name of the target it was attributed to; empty for the host
  std::vector<Frame> frames; // outermost (root) first: user frames, then kernel frames
  uint64_t count = 0;
  // Where the target is a Kubernetes pod: the ID of the pod's container the process ran in.
  std::string pod_container_id;
  // Of count, the samples whose stack is incomplete (their coverage, profile/coverage.h):
  uint64_t lost_samples = 0; // the kernel could not keep the kernel or the user stack
  uint64_t cut_samples = 0;  // not lost, but the unwinder or a budget cut off outer frames
};

// How many user frames the symbolizer could not name, by where the code was, and what the
// budgets on names cut (see symbolize/symbolizer.h).
struct SymbolizeStats {
  uint64_t native_frames = 0;    // in ELF files
  uint64_t native_unnamed = 0;   // of those, without a symbol
  uint64_t jit_frames = 0;       // in anonymous executable memory (JIT code)
  uint64_t jit_unnamed = 0;      // of those, not in the process's perf map
  uint64_t truncated_names = 0;  // frame names cut short: they end in "[truncated]"
  uint64_t truncated_stacks = 0; // stacks that lost frames: a "[truncated]" frame is in their place
  uint64_t native_inlined_frames = 0; // functions inlined into native frames, named from DWARF
  SymbolizeStats& operator+=(const SymbolizeStats& other)
  {
    native_frames += other.native_frames;
    native_unnamed += other.native_unnamed;
    native_inlined_frames += other.native_inlined_frames;
    jit_frames += other.jit_frames;
    jit_unnamed += other.jit_unnamed;
    truncated_names += other.truncated_names;
    truncated_stacks += other.truncated_stacks;
    return *this;
  }
};

// What a target's samples are labelled with in pprof, beside the target's name: where it is a
// container, which one, and for a Kubernetes pod (or a container of one), which pod.
struct TargetLabels {
  std::string container;      // the container's name: Docker's, podman's, or the pod's container
  std::string container_id;   // full ID
  std::string namespace_name; // the pod's Kubernetes namespace
  std::string pod;

  friend bool operator==(const TargetLabels&, const TargetLabels&) = default;
};

struct SymbolizedProfile {
  std::chrono::system_clock::time_point start;
  std::chrono::system_clock::time_point end;
  uint32_t frequency_hz = 0;
  std::vector<Stack> stacks;
  DropCounters counters;
  // GNU build ID (hex) of each ELF file named as a frame's module, where it has one.
  std::map<std::string, std::string> build_ids;
  // The labels of each target (by name) that has any; the latest of a name wins.
  std::map<std::string, TargetLabels> target_labels;
  // The labels of the containers of pod targets, by container ID (Stack::pod_container_id).
  std::map<std::string, TargetLabels> pod_container_labels;
  std::string node; // the host's name
  SymbolizeStats symbolize_stats;

  // Total samples over all stacks.
  uint64_t total_samples() const
  {
    uint64_t total = 0;
    for (const auto& stack : stacks)
      total += stack.count;
    return total;
  }
};

} // namespace flamebpf::profile
