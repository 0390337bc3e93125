// Makes JVMs name their JIT code: for every JVM in a target that keeps no perf map current, loads
// flamebpf's agent into it through HotSpot's attach mechanism, and warns once about a JVM whose
// Java stacks will be cut short for lack of -XX:+PreserveFramePointer. Attaching takes a JVM up to
// a few hundred milliseconds, so it runs on a thread of its own and never delays sampling.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_set>

namespace flamebpf::jvm {

struct AttacherOptions {
  bool attach = true; // false (--no-attach): only the frame-pointer check, from /proc
  std::chrono::milliseconds timeout{5000}; // per JVM, for each exchange with it
  std::string proc_root = "/proc";
};

class AgentAttacher {
public:
  AgentAttacher(std::span<const unsigned char> agent_library, AttacherOptions options);
  // Finishes the JVM being attached (bounded by the timeout) and drops the rest.
  ~AgentAttacher();
  AgentAttacher(const AgentAttacher&) = delete;
  AgentAttacher& operator=(const AgentAttacher&) = delete;

  // A JVM was sampled for the first time. keeps_perf_map: an agent that keeps its map current is
  // loaded already. where names it in messages ("container web"). Returns at once; each pid is
  // handled once.
  void on_jvm(uint32_t host_pid, bool keeps_perf_map, const std::string& where);

  // Waits until every JVM handed in so far was handled, or until deadline.
  void wait_idle(std::chrono::steady_clock::time_point deadline);

  // JVMs the agent was loaded into, and those where that failed.
  uint64_t attached() const;
  uint64_t failed() const;

private:
  struct Request {
    uint32_t pid;
    bool keeps_perf_map;
    std::string where;
  };
  void run();
  void handle(const Request& request);
  void check_frame_pointers(const Request& request, bool attached);

  std::span<const unsigned char> library_;
  std::string file_name_; // the worker's own, set on first use
  AttacherOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<Request> queue_;
  std::unordered_set<uint32_t> seen_;
  bool busy_ = false;
  bool stopping_ = false;
  uint64_t attached_ = 0;
  uint64_t failed_ = 0;
  std::thread worker_;
};

} // namespace flamebpf::jvm
