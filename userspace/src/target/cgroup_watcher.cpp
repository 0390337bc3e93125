#include "target/cgroup_watcher.h"

#include <cerrno>
#include <cstring>
#include <sys/inotify.h>
#include <unistd.h>
#include <unordered_set>

#include "common/log.h"

namespace flamebpf::target {

CgroupWatcher::CgroupWatcher() : fd_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC))
{
  if (!fd_.valid())
    spdlog::debug("inotify unavailable ({}); containers are found at each interval",
                  std::strerror(errno));
}

size_t CgroupWatcher::watch(const std::vector<std::string>& directories)
{
  if (!fd_.valid())
    return 0;
  size_t added = 0;
  std::unordered_set<std::string> wanted(directories.begin(), directories.end());
  for (auto it = watches_.begin(); it != watches_.end();) {
    if (wanted.contains(it->first)) {
      ++it;
      continue;
    }
    ::inotify_rm_watch(fd_.get(), it->second); // fails harmlessly for a removed directory
    it = watches_.erase(it);
  }
  for (const auto& directory : directories) {
    if (watches_.contains(directory))
      continue;
    int watch = ::inotify_add_watch(fd_.get(), directory.c_str(),
                                    IN_CREATE | IN_DELETE | IN_ONLYDIR | IN_DONT_FOLLOW);
    if (watch >= 0) {
      watches_.emplace(directory, watch);
      ++added;
    } else if (errno == ENOSPC && !limit_reported_) {
      limit_reported_ = true;
      spdlog::debug("inotify watch limit reached at {} cgroup directories; the rest are "
                    "rescanned each interval",
                    watches_.size());
    }
  }
  return added;
}

bool CgroupWatcher::changed()
{
  if (!fd_.valid())
    return false;
  bool any = false;
  alignas(inotify_event) char buffer[8192];
  for (;;) {
    ssize_t n = ::read(fd_.get(), buffer, sizeof buffer);
    if (n <= 0)
      break; // EAGAIN: drained
    for (ssize_t offset = 0; offset < n;) {
      auto* event = reinterpret_cast<const inotify_event*>(buffer + offset);
      // Only subdirectories matter; cgroup interface files never come and go on their own.
      if (event->mask & (IN_CREATE | IN_DELETE | IN_Q_OVERFLOW))
        any = true;
      offset += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
    }
  }
  return any;
}

} // namespace flamebpf::target
