// Names a JVM's generated code from outside it, by reading HotSpot's code cache through the
// VMStructs tables its libjvm exports, as HotSpot's own debuggers do. This is how the JIT frames of
// a JVM are named when nothing inside it can do so: no agent could be loaded and HotSpot cannot
// write its perf map (a container with a read-only root and no writable /tmp, where HotSpot
// cannot even create its attach socket).
//
// The JVM's memory is hostile input: every value is checked before it is followed, names are cut
// to a budget, and every JVM has a budget of bytes read per interval. A process that only looks
// like a JVM (a file named libjvm.so) gets nothing named.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "code_blobs.h"
#include "common/proc_maps.h"
#include "common/process_memory.h"
#include "common/result.h"
#include "symbolize/perf_map.h"
#include "vm_memory.h"
#include "vm_structs.h"

namespace flamebpf::hotspot {

using symbolize::PerfMapEntry;

// A JVM's memory as HotSpot's tables are read through (agent::VmMemory), within its budget.
class JvmMemory final : public agent::VmMemory {
public:
  explicit JvmMemory(uint32_t host_pid) : memory_(host_pid) {}
  bool read(uint64_t address, void* out, size_t bytes) const override
  {
    return memory_.read(address, out, bytes);
  }
  void renew_budget(uint64_t bytes) { memory_.renew_budget(bytes); }
  bool budget_spent() const { return memory_.budget_spent(); }
  uint64_t spent() const { return memory_.spent(); }

private:
  ProcessMemory memory_;
};

class HotSpotCode {
public:
  // Reads the VMStructs of the JVM host_pid whose libjvm.so is mapped as libjvm (an executable
  // mapping of it). Fails, saying why, if libjvm exports no tables, or they lack a name needed, or
  // the process's memory cannot be read.
  [[nodiscard]] static Result<std::unique_ptr<HotSpotCode>>
  open(uint32_t host_pid, const std::string& proc_root, const procfs::Mapping& libjvm);

  // The piece of code holding address, named as flamebpf's agent names it in its perf map: a
  // compiled method as "org.example.Foo.bar(long)", anything else (the interpreter, a stub) by
  // its blob's name. nullopt if no code heap holds it, what was read is not plausible, or this
  // interval's budget is spent.
  std::optional<PerfMapEntry> find(uint64_t address);

  // A new interval: its budget is whole again.
  void begin_interval() { memory_.renew_budget(kBytesPerInterval); }
  bool budget_spent() const { return memory_.budget_spent(); }

  // Reading the tables takes JDK 17 590 KiB (as charged: see common/process_memory.h), naming a
  // piece of code 2 KiB: an interval's budget names some hundred pieces, and a forged JVM costs at
  // most 50 ms once and 20 ms an interval.
  static constexpr uint64_t kBytesToOpen = 2 << 20;
  static constexpr uint64_t kBytesPerInterval = 1 << 20;
  // The longest class or method name taken (HotSpot's symbols may be 64 KiB).
  static constexpr size_t kMaxNameBytes = 4096;

private:
  using Finder = agent::CodeBlobFinder;
  using Typed = Finder::Typed;
  HotSpotCode(uint32_t host_pid, agent::CodeBlobFinder finder) : memory_(host_pid), finder_(finder)
  {
  }
  // The Java name of the method at method ("Foo.bar(long)"); nullopt if not plausible.
  std::optional<std::string> method_name(uint64_t method) const;
  // The text of the Symbol at symbol, cut to kMaxNameBytes.
  std::optional<std::string> symbol_text(uint64_t symbol) const;

  JvmMemory memory_;
  agent::CodeBlobFinder finder_;
  uint64_t blob_name = 0;    // CodeBlob::_name
  uint64_t method_field = 0; // nmethod::_method (CompiledMethod::_method up to JDK 20)
  uint64_t const_method = 0; // Method::_constMethod
  uint64_t constants = 0;    // ConstMethod::_constants
  Typed name_index;          // ConstMethod::_name_index
  Typed signature_index;     // ConstMethod::_signature_index
  uint64_t pool_holder = 0;  // ConstantPool::_pool_holder
  uint64_t pool_size = 0;    // sizeof(ConstantPool): its entries follow it
  uint64_t klass_name = 0;   // Klass::_name
  Typed symbol_length;       // Symbol::_length
  uint64_t symbol_body = 0;  // Symbol::_body
};

} // namespace flamebpf::hotspot
