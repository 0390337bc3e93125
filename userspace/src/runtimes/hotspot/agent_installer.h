// Places the JVMTI agent library inside a container, where the JVM can dlopen it: the host's
// copy is not visible in the container's mount namespace.
#pragma once

#include <array>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "runtimes/hotspot/hotspot_attach.h"

namespace flamebpf::hotspot {

// Directories tried in turn, as the JVM sees them. One mounted noexec is skipped, because the
// JVM's dlopen would fail there ("failed to map segment from shared object"); Docker mounts
// --tmpfs and /dev/shm noexec by default.
inline constexpr std::array<std::string_view, 3> kAgentDirectories = {"/tmp", "/var/tmp",
                                                                      "/dev/shm"};

// Besides those, the JVM's own mount points (from its mountinfo) are tried, after them and at
// most this many: a hardened container's only writable, exec-able directory may be a volume.
inline constexpr size_t kMaxAgentMounts = 16;

// The mount points in mountinfo text (a JVM's, so paths inside its root) that might take the
// agent: of a file system that holds files (no proc, sysfs, cgroup and the like), not the root
// and nothing below /proc, /sys or /dev but /dev/shm, none of kAgentDirectories, each once, at
// most kMaxAgentMounts. Whether each is writable and exec-able is for the install to find out.
[[nodiscard]] std::vector<std::string> agent_mount_candidates(std::string_view mountinfo);

// A name that changes with the library's content, "libflamebpf-agent-<16 hex digits>.so" (64-bit
// FNV-1a): a new flamebpf build never meets an older build's file under the same name.
[[nodiscard]] std::string agent_file_name(std::span<const unsigned char> library);

// Where install_agent put the library.
struct InstalledAgent {
  std::string path; // as the JVM sees it, e.g. "/tmp/libflamebpf-agent-0123456789abcdef.so"
  // Empty if the library has its usual name (file_name); otherwise why that name could not be
  // used, and the library went under a fresh one instead, for this attach only: remove_agent()
  // removes it once the JVM has loaded it.
  std::string usual_name_taken;
  // Placed in one of the JVM's own mounts (not a scratch directory), under a fresh name:
  // remove_agent() removes it once the JVM has loaded it.
  bool in_application_mount = false;
  uint64_t device = 0; // the file's st_dev and st_ino, to remove that file and no other
  uint64_t inode = 0;
};

// Writes library as <directory>/<file_name> in the first of kAgentDirectories (then of the JVM's
// mount points, under a fresh name, see agent_mount_candidates) that exists inside
// the target's root (resolved as if it were "/", so no symlink leads out of the container), is
// not mounted noexec or read-only, and that no user but root, the container's root and the JVM's
// could swap the library in: it belongs to one of them and, if others may write it, is sticky.
//
// A new file is written to a temporary name (O_CREAT|O_EXCL|O_NOFOLLOW, never guessable), made
// mode 0644 and owned by the JVM's uid/gid, fsync'd, then renamed into place without replacing
// anything, so the JVM never sees a partial library. An existing file is reused only if it is a
// regular file with the same bytes, owned by the JVM's uid or root and writable by no one else
// (else another user of the container could swap the code the JVM runs); it is never opened
// unless it is a regular file. Anything else of that name (another user's file, different
// content, a symlink, FIFO, device or directory) is left alone, and the library goes under a
// fresh name no one can guess, "<file_name without .so>-<16 random hex digits>.so", in the same
// directory. Fails, naming every directory tried and why, if none fits.
[[nodiscard]] Result<InstalledAgent> install_agent(const AttachTarget& target,
                                                   std::span<const unsigned char> library,
                                                   std::string_view file_name);

// Removes an agent installed under a fresh name (as the JVM's user, and only if the name still
// holds the file installed); the JVM keeps what it mapped. Does nothing for one under its usual
// name in a scratch directory, which later attaches reuse.
void remove_agent(const AttachTarget& target, const InstalledAgent& installed);

} // namespace flamebpf::hotspot
