// Places the JVMTI agent library inside a container, where the JVM can dlopen it: the host's
// copy is not visible in the container's mount namespace.
#pragma once

#include <array>
#include <span>
#include <string>
#include <string_view>

#include "common/result.h"
#include "jvm/hotspot_attach.h"

namespace flamebpf::jvm {

// Directories tried in turn, as the JVM sees them. One mounted noexec is skipped, because the
// JVM's dlopen would fail there ("failed to map segment from shared object"); Docker mounts
// --tmpfs and /dev/shm noexec by default.
inline constexpr std::array<std::string_view, 3> kAgentDirectories = {"/tmp", "/var/tmp",
                                                                      "/dev/shm"};

// A name that changes with the library's content, "libflamebpf-agent-<16 hex digits>.so" (64-bit
// FNV-1a): a new flamebpf build never meets an older build's file under the same name.
[[nodiscard]] std::string agent_file_name(std::span<const unsigned char> library);

// Writes library as <directory>/<file_name> in the first of kAgentDirectories that exists inside
// the target's root (resolved as if it were "/", so no symlink leads out of the container), is not
// mounted noexec or read-only, and where the name is free or already holds this very library.
// Returns the path as the JVM sees it, e.g. "/tmp/libflamebpf-agent-0123456789abcdef.so".
//
// A new file is written to a temporary name (O_CREAT|O_EXCL|O_NOFOLLOW), made mode 0644 and
// owned by the JVM's uid/gid, fsync'd, then renamed into place without replacing anything, so
// the JVM never sees a partial library. An existing file is reused only if it is a regular file
// with the same bytes, owned by the JVM's uid or root and writable by no one else (else another
// user of the container could swap the code the JVM runs). Any other file of that name (different
// content, symlink, FIFO, directory) is left alone and the next directory is tried. Fails, naming
// every directory tried and why, if none fits.
[[nodiscard]] Result<std::string> install_agent(const AttachTarget& target,
                                                std::span<const unsigned char> library,
                                                std::string_view file_name);

} // namespace flamebpf::jvm
