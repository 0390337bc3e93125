// Debug files fetched from debuginfod servers (elfutils' libdebuginfod), by build ID, for stripped
// files no local debug file names: only from the servers --debuginfod names (never from
// DEBUGINFOD_URLS in flamebpf's environment: a fetch tells the server every container's build
// IDs), off the sampling path, into a disk cache of flamebpf's own whose total size is bounded.
//
// A fetch never holds back a profile: a file asks for its debug file when it is first read, and
// is read again once the file has arrived, so its frames are named from the next interval on (and
// in `flamebpf merge`'s sums of later windows). Servers and their answers are hostile input: each
// fetch has a deadline for the whole transfer (a server that answers byte by byte is cut off as
// one that never answers) and a size limit; at most kWorkers fetches run at once and at most
// kMaxQueued wait; what arrives is used only if its build ID is the file's (elf_symbols.cpp checks
// it). Trouble costs one line per kind and a count.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"

namespace flamebpf::symbolize {

struct DebuginfodOptions {
  std::string urls;      // space-separated server URLs, as DEBUGINFOD_URLS
  std::string cache_dir; // absolute; made 0700 if missing
  std::chrono::seconds timeout{30};
  uint64_t max_file_bytes = uint64_t{1} << 30;
  // The whole cache: past it, the debug files used longest ago are removed, so that containers
  // asking for many files cannot fill the disk.
  uint64_t max_cache_bytes = uint64_t{2} << 30;
};

class DebugFetcher {
public:
  // Checks that cache_dir, and every directory above it, belongs to root (or flamebpf's user) and
  // that no one else may write them (else a local user could swap a component for a link and have
  // the fetched files written elsewhere), makes cache_dir if missing, and starts the workers.
  // Fails, saying why, if the cache cannot be trusted.
  [[nodiscard]] static Result<std::unique_ptr<DebugFetcher>> start(DebuginfodOptions options);
  // Cuts off fetches in progress (within a second) and waits for the workers.
  ~DebugFetcher();
  DebugFetcher(const DebugFetcher&) = delete;
  DebugFetcher& operator=(const DebugFetcher&) = delete;

  // The debug file of build_id (raw bytes) if the cache holds it, opened; otherwise queues a
  // fetch (once per build ID in a run) and returns nullopt. shown names the file that wants it.
  // Safe from any thread.
  std::optional<UniqueFd> find(std::string_view build_id, const std::string& shown);
  // The build IDs (lowercase hex) whose debug files arrived since the last call.
  std::vector<std::string> take_arrived();

  struct Counts {
    uint64_t fetched = 0;
    uint64_t failed = 0;
    uint64_t dropped = 0; // not queued: kMaxQueued were waiting
  };
  Counts counts() const;

  static constexpr size_t kWorkers = 2;
  static constexpr size_t kMaxQueued = 256;

private:
  explicit DebugFetcher(DebuginfodOptions options) : options_(std::move(options)) {}
  void work();
  // Fetches one build ID (hex); 0 on success, else the failure's errno, -1 if the deadline, the
  // size limit or the fetcher's end cut it off, or -2 if the answer ended before the length its
  // server announced.
  int fetch(const std::string& build_id);
  // Where libdebuginfod keeps build_id's debug file in the cache.
  std::string cached_path(const std::string& build_id) const;
  // Removes the debug files used longest ago (build_id's last) until the cache holds at most
  // max_cache_bytes.
  void trim_cache(const std::string& kept_build_id);

  DebuginfodOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::pair<std::string, std::string>> queue_; // build ID (hex), file wanting it
  std::unordered_set<std::string> asked_;                 // build IDs queued or fetched this run
  std::vector<std::string> arrived_;
  std::unordered_set<int> errors_said_; // failures (as fetch() returns them) warned about once
  Counts counts_;
  std::mutex trim_mutex_; // one trim at a time
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> workers_;
};

} // namespace flamebpf::symbolize
