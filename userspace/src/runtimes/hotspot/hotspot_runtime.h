// HotSpot as a runtime (runtimes/runtime.h): a JVM is found by its libjvm.so; its perf map is
// opened at its first capture and read as it grows; its JIT code is named by that map, else read
// from outside through its code cache (hotspot_code.h); its interpreted frames by the records of
// flamebpf's agent (jvm_records.h), from which its JIT code also gets unwind tables (jit_table.h);
// and the attacher (agent_attacher.h) loads the agent into each JVM found, or has HotSpot write
// its map.
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "common/stall_guard.h"
#include "runtimes/hotspot/agent_attacher.h"
#include "runtimes/hotspot/hotspot_code.h"
#include "runtimes/hotspot/jit_table.h"
#include "runtimes/hotspot/jvm_records.h"
#include "runtimes/runtime.h"
#include "symbolize/process_table.h"

namespace flamebpf::hotspot {

struct HotSpotOptions {
  bool java_signatures = false; // Java frames with their parameter types
  AttacherOptions attacher;
  // The sampler unwinds JIT code by the agent's records (the unwinder is on).
  bool unwinds_by_records = false;
};

class HotSpotRuntime final : public runtimes::Runtime {
public:
  explicit HotSpotRuntime(HotSpotOptions options);
  ~HotSpotRuntime() override;

  std::string_view name() const override { return "HotSpot"; }
  void captured(symbolize::ProcessTable& processes,
                const symbolize::ImageKey& key,
                const symbolize::ProcessImage& image,
                const std::vector<procfs::Mapping>& mappings) override;
  std::optional<runtimes::NamedCode> name_code(symbolize::ProcessTable& processes,
                                               const symbolize::ImageKey& key,
                                               uint64_t address,
                                               bool anonymous) override;
  // FB_FRAME_RUNTIME_MARKER: the interpreted method, named by the JVM's records; "Interpreter" if
  // they do not name it.
  std::optional<profile::Frame> name_marker(symbolize::ProcessTable& processes,
                                            const symbolize::ImageKey& key,
                                            uint64_t frame) override;
  bool wants_recapture(const symbolize::ImageKey& key) const override;
  void forget(const symbolize::ImageKey& key, bool exited) override;
  // Reads what JVMs appended to their perf maps, so that the map of a JVM that exits soon after
  // its agent loaded is open (and readable to its end) before it is gone. A JVM whose map and
  // records stay as they were is read at ever fewer polls (PollPace), one whose samples fell in
  // code its map did not name at the next.
  void poll(symbolize::ProcessTable& processes) override;
  // The unwind tables of the JVMs whose agents' records changed (the records of the JVMs the
  // last poll read are read now: a JVM's new code needs its rows before its samples unwind well),
  // covering only code inside the JVM's anonymous executable mappings.
  std::vector<runtimes::CodeTable> take_code_tables(symbolize::ProcessTable& processes) override;
  // The perf maps HotSpot rewrote on request are read again from their start.
  void before_naming(symbolize::ProcessTable& processes) override;
  // JVMs with JIT code their perf maps did not name: a map written on request is behind.
  void after_naming(symbolize::ProcessTable& processes) override;
  // JVMs being attached get the chance to name the last interval's frames; one stuck on its file
  // system is left to the process's exit.
  void stop() override;

  // The images known to be JVMs now, and those found to be since the start (each once, at the
  // capture that first found libjvm.so mapped); the attacher they were handed to.
  size_t jvms() const;
  uint64_t jvms_found() const { return jvms_found_; }
  // Null once stop() found it stuck.
  const AgentAttacher* attacher() const { return attacher_.get(); }

  // How long reading a JVM's records or memory may go without progress before it is left.
  static constexpr std::chrono::milliseconds kStallLimit{1000};

  // The most polls a quiet JVM's files wait before they are read again: at the recorder's 250 ms
  // a poll, new JIT code of a JVM quiet for long has its unwind rows within 2 s.
  static constexpr uint32_t kMostPollsSkipped = 7;
  // The most for a JVM with no perf map and no agent that keeps one (its code is read from
  // outside): its map's path is looked up in its container every 10 s once quiet, as a map's
  // path is checked for a replaced file.
  static constexpr uint32_t kMostPollsSkippedWithoutMap = 39;

private:
  // When a JVM's perf map and records are read: at every poll while either grows, then at every
  // 2nd, 4th and 8th poll while both stay as they were (up to every 40th while it has no map).
  struct PollPace {
    uint32_t polls_to_skip = 0; // before the next read
    uint32_t gap = 0;           // polls skipped after the last read: 0, then 1, 3, 7 while quiet
    bool read_at_last_poll = false;
    uint64_t changes_seen = 0; // the files' changes() summed, as the last read left them
  };

  // What HotSpot keeps of one image: a JVM, a launcher that may load one, or any image whose
  // interpreted frames the unwinder marked.
  struct Image {
    bool jvm = false;            // libjvm.so is mapped (and OpenJ9's VM is not)
    bool launcher = false;       // the java launcher, not yet found with libjvm.so mapped
    bool keeps_perf_map = false; // an agent that keeps /tmp/perf-<pid>.map current is loaded
    // The agent's unwind records, which name interpreted frames; opened on the first interpreted
    // frame, and read at most once per generation.
    std::shared_ptr<JvmRecordsReader> records;
    uint64_t records_generation = 0;
    // A read of records that stalled (its file system does not answer) and still runs.
    std::optional<std::shared_future<bool>> records_stalled;
    // The JVM's unwind table, rebuilt from records when they change.
    JitTableKeeper jit_table;
    bool jit_drops_reported = false;
    // The JVM's code as read from outside it, for JIT addresses its perf map does not name:
    // opened on the first such address (once: a failure is not tried again); the pieces of code
    // found are kept for the generation, since code is freed and reused.
    std::shared_ptr<HotSpotCode> code;
    bool code_tried = false;
    symbolize::PerfMapTable found;
    uint64_t code_generation = 0;
    PollPace pace;

    // Whether records may be used now: there are some and no stalled read holds them.
    bool records_usable();
  };

  // key's records, read up to now (at most once per generation, unless read_now: then again,
  // within the generation's budget of bytes); null if its pid namespace cannot be known or a read
  // of them stalls.
  const JvmRecords*
  records(symbolize::ProcessTable& processes, const symbolize::ImageKey& key, bool read_now);
  // The piece of the JVM's generated code holding address, read from outside it; nullopt if the
  // code cannot be read or found. Valid until the next call.
  std::optional<symbolize::PerfMapTable::Entry> code_read_from_outside(
      symbolize::ProcessTable& processes, const symbolize::ImageKey& key, uint64_t address);
  // Where a JVM is, for messages: its target, else its cgroup (a container not yet a target).
  static std::string describe(const symbolize::ProcessTable& processes,
                              const symbolize::ImageKey& key,
                              const symbolize::ProcessImage& image);

  HotSpotOptions options_;
  // On the heap, and released if it is stuck (see stop()); null from then on, since its worker
  // still uses it.
  std::unique_ptr<AgentAttacher> attacher_;
  std::unordered_map<symbolize::ImageKey, Image, symbolize::ImageKeyHash> images_;
  // Processes with JIT code their perf maps did not name, since after_naming().
  std::unordered_set<uint32_t> unnamed_;
  // JVMs whose code could not be read from outside, said once each.
  std::unordered_set<uint32_t> refused_;
  uint64_t jvms_found_ = 0;
  StallGuard stall_guard_{kStallLimit};
};

} // namespace flamebpf::hotspot
