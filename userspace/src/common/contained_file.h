// Opening files that flamebpf must not trust: a container's (its perf maps, ELF and debug files,
// runtime state) and a host process's whose owner is not root. There is one way in:
//   1. the path is resolved from a directory descriptor with openat2's RESOLVE_* flags (for a
//      container, RESOLVE_IN_ROOT: as if its root were "/", so no symlink or ".." leads out),
//      as O_PATH, which opens nothing for real: no FIFO waits, no device driver runs, no
//      terminal becomes ours;
//   2. fstat: anything but a regular file is refused;
//   3. the same inode is reopened for reading, O_RDONLY|O_NOCTTY|O_NONBLOCK.
// Every read then has a byte budget.
#pragma once

#include <cstddef>
#include <cstdint>
#include <linux/openat2.h>
#include <optional>
#include <string>
#include <sys/types.h>

#include "common/result.h"
#include "common/unique_fd.h"

namespace flamebpf {

// The resolve flags for a path inside a container's root: symlinks and ".." stay inside it, and
// /proc magic links (which could name any file of any process) are refused.
inline constexpr uint64_t kResolveInRoot = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
// The resolve flags for a name directly in a directory: no symlink at all is followed.
inline constexpr uint64_t kResolveBeneathNoLinks =
    RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;

// Opens path below dir_fd with openat2: the open flags (O_CLOEXEC is added) and the RESOLVE_*
// flags as given; a file it creates (O_CREAT) gets mode, as the calling thread's filesystem ids.
// For what flamebpf creates itself or looks at as O_PATH; a file to read is opened with
// open_regular_at. shown names the file in errors.
[[nodiscard]] Result<UniqueFd> open_resolved(int dir_fd,
                                             const std::string& path,
                                             uint64_t flags,
                                             uint64_t resolve,
                                             const std::string& shown,
                                             mode_t mode = 0600);

// What is at name directly in dir_fd, as an O_PATH|O_NOFOLLOW descriptor of the name itself:
// nothing is opened for real, and a symlink planted there is returned as the symlink. nullopt if
// nothing is there.
[[nodiscard]] Result<std::optional<UniqueFd>>
find_entry(int dir_fd, const std::string& name, const std::string& shown);

// Opens a directory as an O_PATH descriptor, to resolve paths from (e.g. "/proc/<pid>/root").
[[nodiscard]] Result<UniqueFd> open_directory(const std::string& path);

// Opens path (a directory) below dir_fd with the given RESOLVE_* flags, as an O_PATH descriptor.
// shown names it in errors.
[[nodiscard]] Result<UniqueFd>
open_directory_at(int dir_fd, const std::string& path, uint64_t resolve, const std::string& shown);

// Opens `path` (a directory, absolute or relative) inside `root` as an O_PATH descriptor,
// resolved as if root were "/".
[[nodiscard]] Result<UniqueFd> open_directory_in_root(const std::string& root,
                                                      const std::string& path);

// The three steps above: path resolved from dir_fd with `resolve`, then checked and reopened.
// Fails (errno ELOOP, ENOENT, ... from the resolution; EINVAL for a file that is not regular)
// without ever opening anything but a regular file. shown names the file in errors.
[[nodiscard]] Result<UniqueFd>
open_regular_at(int dir_fd, const std::string& path, uint64_t resolve, const std::string& shown);

// Steps 2 and 3 for a file already open as O_PATH (or any descriptor of it): a magic link such
// as /proc/<pid>/map_files/<range> opened with O_PATH lands here.
[[nodiscard]] Result<UniqueFd> reopen_regular(int path_fd, const std::string& shown);

// Opens path (absolute or relative, interpreted inside root) for reading. root is a directory
// such as /proc/<pid>/root.
[[nodiscard]] Result<UniqueFd> open_contained(const std::string& root, const std::string& path);

// The first max_bytes of the open file fd, from its start; error_if_larger makes a larger file an
// error instead of a truncated read. shown names the file in errors.
[[nodiscard]] Result<std::string>
read_bounded(int fd, size_t max_bytes, bool error_if_larger, const std::string& shown);

// The first max_bytes of the regular file at path inside root; error_if_larger makes a larger file
// an error instead of a truncated read.
[[nodiscard]] Result<std::string> read_contained(const std::string& root,
                                                 const std::string& path,
                                                 size_t max_bytes,
                                                 bool error_if_larger = true);

} // namespace flamebpf
