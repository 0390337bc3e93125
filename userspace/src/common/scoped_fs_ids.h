// Creating files as another user, from one thread of a process that runs as root.
#pragma once

#include <cstdint>

namespace flamebpf {

// While alive, files this thread creates belong to uid/gid: its filesystem ids (setfsuid,
// setfsgid, which Linux keeps per thread) are those, the rest of the process is untouched.
// Needed because host root cannot create files at all in a filesystem mounted inside a user
// namespace where it is unmapped (EOVERFLOW), as with rootless or user-namespaced containers; it
// also gives the files their owner's ownership without chown. Root loses its file capabilities
// (CAP_DAC_OVERRIDE, CAP_CHOWN, ...) meanwhile, so only what that user may do succeeds.
class ScopedFsIds {
public:
  ScopedFsIds(uint32_t uid, uint32_t gid);
  ~ScopedFsIds();
  ScopedFsIds(const ScopedFsIds&) = delete;
  ScopedFsIds& operator=(const ScopedFsIds&) = delete;

  // Whether the switch took effect (it needs CAP_SETUID/CAP_SETGID unless the ids are ours).
  bool active() const { return active_; }

private:
  uint32_t previous_uid_;
  uint32_t previous_gid_;
  bool active_ = false;
};

} // namespace flamebpf
