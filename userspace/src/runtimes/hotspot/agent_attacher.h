// Makes JVMs name their JIT code: for every JVM in a target that keeps no perf map current, loads
// flamebpf's agent into it through HotSpot's attach mechanism, and warns once about a JVM whose
// Java stacks will be cut short for lack of -XX:+PreserveFramePointer. Attaching takes a JVM up to
// a few hundred milliseconds, so it runs on a thread of its own and never delays sampling.
//
// Where the agent cannot load (a hardened container has no directory both writable and exec-able
// for it), HotSpot itself is asked to write its perf map (jcmd Compiler.perfmap, JDK 17 and
// later), and asked again whenever samples meet JIT code the map does not name, at a pace that
// keeps the cost of writing it under 1 % of one of the JVM's threads.
//
// A JVM is often first sampled while it starts, before it handles SIGQUIT, and HotSpot's attach
// can only begin with SIGQUIT (whose default action would kill it): such a JVM is tried again,
// backing off, until it handles the signal or starting_patience has passed.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "runtimes/hotspot/hotspot_attach.h"

namespace flamebpf::hotspot {

struct AttacherOptions {
  bool attach = true; // false (--no-attach): only the frame-pointer check, from /proc
  std::chrono::milliseconds timeout{5000}; // per JVM, for each exchange with it
  // How long a JVM that does not handle SIGQUIT yet is waited for, counted from when it was handed
  // in; after that it is attached anyway (which fails, with the reason, unless its attach listener
  // runs already).
  std::chrono::milliseconds starting_patience{60000};
  std::string proc_root = "/proc";
};

class AgentAttacher {
public:
  AgentAttacher(std::span<const unsigned char> agent_library, AttacherOptions options);
  // Finishes the JVM being attached (its exchanges bounded by the timeout) and drops the rest.
  ~AgentAttacher();

  // Drops the JVMs not handled yet and waits, up to deadline, for the one being attached. False
  // if the worker is still busy then: stuck on a container's file system that does not answer,
  // which no timeout and no signal can end. Such an attacher must never be destroyed, since its
  // worker still uses it; the process's exit ends both.
  [[nodiscard]] bool stop(std::chrono::steady_clock::time_point deadline);
  AgentAttacher(const AgentAttacher&) = delete;
  AgentAttacher& operator=(const AgentAttacher&) = delete;

  // A process was found to be a JVM. keeps_perf_map: an agent that keeps its map current is
  // loaded already. where names it in messages ("target web"). Returns at once; each process
  // (pid and start time: a reused pid is a new process) is handled once, however many of its
  // images (a script that execs java) were taken for JVMs.
  void on_jvm(uint32_t host_pid, bool keeps_perf_map, const std::string& where);

  // An image of host_pid was forgotten: if the process handed in with that pid is gone, it is no
  // longer waited for or remembered.
  void forget_if_gone(uint32_t host_pid);

  // Samples of host_pid met JIT code its perf map does not name. A JVM whose map HotSpot writes
  // on request has it written again, unless that was done too recently (see kMapRewriteCost).
  void perf_map_lacks_code(uint32_t host_pid);
  // The JVMs whose perf maps HotSpot wrote (in place, over the last one) since the last call.
  std::vector<uint32_t> take_rewritten_perf_maps();

  // Waits until every JVM handed in so far was handled, or until deadline. JVMs still starting
  // are not waited for.
  void wait_idle(std::chrono::steady_clock::time_point deadline);

  // From now on the sampler unwinds JIT-compiled code by the frame sizes the agent records
  // (/tmp/flamebpf-<pid>.unwind): a JVM whose agent writes them needs no frame pointers, and
  // gets no warning for lacking them.
  void unwind_by_agent_records() { unwinds_by_agent_records_ = true; }

  // JVMs the agent was loaded into, those whose perf maps HotSpot writes on request instead, and
  // those where both failed.
  uint64_t attached() const;
  uint64_t named_by_map_command() const;
  uint64_t failed() const;
  // JVMs handed in and not handled yet: queued, being attached, or waited for while they start.
  size_t pending() const;
  // How many times a JVM was found still starting and put off.
  uint64_t put_off() const;

  // A map rewrite may cost the JVM at most 1/kMapRewriteCost of the time since the last one:
  // writing 100k pieces of code takes HotSpot tens of milliseconds, holding its code cache's lock.
  static constexpr int kMapRewriteCost = 100;
  static constexpr std::chrono::milliseconds kMinMapRewriteGap{1000};

private:
  using Clock = std::chrono::steady_clock;
  struct Request {
    uint32_t pid = 0;
    uint64_t start_time = 0; // the process's, from /proc/<pid>/stat
    bool keeps_perf_map = false;
    std::string where;
    Clock::time_point handed_in;
    int put_off = 0;          // times found still starting
    Clock::time_point due;    // when a JVM still starting is tried again
    bool rewrite_map = false; // a request to have HotSpot write its perf map again
  };
  // A JVM whose perf map HotSpot writes on request.
  struct MapCommandJvm {
    uint64_t start_time = 0;
    std::string where;
    Clock::time_point next_write; // no rewrite before
    bool queued = false;
  };
  enum class Outcome { kHandled, kStillStarting };
  enum class Attach { kNotTried, kLoaded, kMapCommand, kFailed, kExited };
  void run();
  Outcome handle(Request& request);
  // Installs and loads the agent; says how it went in one line (a debug one if the JVM exited).
  Attach attach(const Request& request, const Result<AttachTarget>& target);
  // Has HotSpot write the perf map of a JVM named that way again.
  void rewrite_perf_map(const Request& request);
  // Remembers a JVM whose map HotSpot was asked to write, which took took, and when it may be
  // asked again; rewritten_ learns of it if it was written.
  void map_written(const Request& request, std::chrono::steady_clock::duration took, bool written);
  // Whether the process is gone (or a zombie) now or within grace.
  bool exits_within(const Request& request, std::chrono::milliseconds grace) const;
  // Warns if the JVM runs without frame pointers: asks the JVM itself when an agent is loaded
  // (its attach listener runs then), else reads its command line. No warning when the JVM's
  // agent writes unwind records and the sampler unwinds by them.
  void
  check_frame_pointers(const Request& request, const Result<AttachTarget>& target, bool attached);

  std::span<const unsigned char> library_;
  std::string file_name_; // the worker's own, set on first use
  AttacherOptions options_;
  std::atomic<bool> unwinds_by_agent_records_{false};
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<Request> queue_;     // to handle now, in order
  std::vector<Request> starting_; // JVMs still starting, each tried again at its due time
  std::unordered_map<uint32_t, uint64_t> seen_; // pid -> start time of each process handed in
  bool busy_ = false;
  bool stopping_ = false;
  bool finished_ = false;                                        // run() returned
  std::unordered_map<uint32_t, MapCommandJvm> map_command_jvms_; // by pid
  std::vector<uint32_t> rewritten_;
  uint64_t attached_ = 0;
  uint64_t named_by_map_command_ = 0;
  uint64_t failed_ = 0;
  uint64_t put_off_ = 0;
  std::thread worker_;
};

} // namespace flamebpf::hotspot
