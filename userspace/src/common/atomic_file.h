// Writing flamebpf's output files without trusting what else is in their directory. A directory
// such as /tmp lets other users plant links, FIFOs or files at any name there, and flamebpf runs
// as root, so:
//   - every file is written from a descriptor of its directory with *at() calls, and nothing at
//     an output's name is ever opened or followed: a new file is written under a temporary name
//     (O_TMPFILE, or O_CREAT|O_EXCL|O_NOFOLLOW under an unpredictable name) and renamed over it;
//   - readers see either the old content or the whole new one, never part;
//   - a directory flamebpf keeps its files in (agent mode's) is opened O_DIRECTORY|O_NOFOLLOW and
//     must be flamebpf's own: a real directory, owned by root (or flamebpf's user), writable by
//     no one else;
//   - nothing is opened that could block (a FIFO) or act when opened (a device).
#pragma once

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <sys/types.h>

#include "common/result.h"
#include "common/unique_fd.h"

namespace flamebpf {

// Who may read a file flamebpf writes, and to whom it belongs.
struct FileAccess {
  mode_t mode = 0600;             // the new file's permissions (the umask applies)
  std::optional<uid_t> owner_uid; // set: the new file is given to this user (and owner_gid)
  gid_t owner_gid = 0;            // before it is renamed into place
};

// Writes a file's content to the stream; an error leaves the old file in place.
using ContentWriter = std::function<Result<>(std::ostream&)>;

// The errno of every refusal below: something that is not flamebpf's own (a link, a directory
// someone else owns or may write, a FIFO) stands where flamebpf writes. Not a passing failure
// such as a full disk: writing again will fail again until someone removes it.
inline constexpr int kRefusedErrno = EPERM;

// Opens path as a directory flamebpf keeps its files in, creating it (mode 0750, and its missing
// parents) if create is set and it does not exist. Refused (errno kRefusedErrno) unless it is a
// real directory, not a symlink, owned by root or flamebpf's effective user and writable by no
// one else; the message says why and how to fix it.
[[nodiscard]] Result<UniqueFd> open_private_directory(const std::string& path, bool create);

// Opens the directory name directly inside dir_fd the same way, never through a symlink, creating
// it with mode 0750 if create is set and it does not exist. shown names it in messages, which say
// what is wrong but not how to fix it: the caller knows.
[[nodiscard]] Result<UniqueFd> open_private_subdirectory(int dir_fd,
                                                         const std::string& name,
                                                         bool create,
                                                         const std::string& shown);

// Writes name inside dir_fd: write_content's bytes go to a new temporary file, flushed to disk,
// given to access's owner, then renamed over name. Whatever stood at name (a file, a link, a FIFO)
// is replaced, never opened; on failure name is untouched and no temporary is left.
[[nodiscard]] Result<> write_file_at(int dir_fd,
                                     const std::string& name,
                                     const FileAccess& access,
                                     const ContentWriter& write_content,
                                     const std::string& shown);

// Makes name inside dir_fd a symlink to target, replacing what was there in one rename.
[[nodiscard]] Result<> replace_symlink_at(int dir_fd,
                                          const std::string& name,
                                          const std::string& target,
                                          const std::string& shown);

// Appends bytes to the file name inside dir_fd in one write, creating it with mode if missing,
// so that concurrent readers see whole lines; a torn write is cut off again. Refused (errno
// kRefusedErrno) unless what is there is a regular file of flamebpf's effective user with one
// link: a link, FIFO, device or a hard link to another file is never opened for writing.
[[nodiscard]] Result<> append_at(int dir_fd,
                                 const std::string& name,
                                 std::string_view bytes,
                                 mode_t mode,
                                 const std::string& shown);

// Whether name is a temporary file or link flamebpf's writes make (or an earlier version made).
bool is_temporary_name(std::string_view name);

// Writes the output file path (-o PATH): like write_file_at in the directory path names (followed
// as given). Besides regular files: "/dev/stdout", "/dev/stderr", "/dev/fd/N" and
// "/proc/self/fd/N" write to that descriptor of flamebpf's; the null device takes the content
// and writes nothing; a FIFO, socket, directory or other device there is refused (errno
// kRefusedErrno for all but a directory) without being opened.
[[nodiscard]] Result<> write_output_file(const std::string& path,
                                         const FileAccess& access,
                                         const ContentWriter& write_content);

// What write_output_file would refuse at path before anything is written: a FIFO, socket, device
// or directory at it, or a missing directory. Checked without opening path.
[[nodiscard]] Result<> check_output_path(const std::string& path);

} // namespace flamebpf
