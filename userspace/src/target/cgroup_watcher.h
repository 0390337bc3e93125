// Notices cgroup directories being created or removed (a container starting or stopping) as it
// happens, through inotify, so that targets are followed without waiting for the next interval.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "common/unique_fd.h"

namespace flamebpf::target {

class CgroupWatcher {
public:
  CgroupWatcher();

  // Watches exactly these directories from now on (absolute paths). Directories beyond the
  // kernel's watch limit are left to the periodic rescan. Returns how many were not watched
  // before: what was created in them between the scan that listed them and now raised no event,
  // so the caller scans again.
  size_t watch(const std::vector<std::string>& directories);

  // Whether a watched directory gained or lost a subdirectory since the last call. Never blocks.
  bool changed();

  // Directories being watched.
  size_t size() const { return watches_.size(); }

private:
  UniqueFd fd_;
  std::unordered_map<std::string, int> watches_; // directory -> watch descriptor
  bool limit_reported_ = false;
};

} // namespace flamebpf::target
