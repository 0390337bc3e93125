// Finding the separate debug file of a stripped ELF file, as gdb and elfutils look for it: by GNU
// build ID (/usr/lib/debug/.build-id/xx/rest.debug), then by the file's .gnu_debuglink (beside the
// file, in its .debug/ directory, under /usr/lib/debug/<its directory>/). Both come from the ELF
// file, so from its owner: a name is taken only if it is a plain file name, every path is built
// here, and every candidate is opened through common/contained_file inside a debug root (never a
// FIFO, device or terminal, never a path out of the root) and then checked: its build ID must be
// the file's, or its CRC the one the link states.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"

namespace flamebpf::symbolize {

// The .gnu_debuglink section is a file name and a CRC: more is no link.
inline constexpr size_t kMaxDebugLinkBytes = 4096;
// A debug file found by .gnu_debuglink is read whole for its CRC, up to this size; a larger one
// is not taken (debug files found by build ID need no CRC).
inline constexpr uint64_t kMaxDebugFileCrcBytes = 256ull << 20;
// Where debug files live below a debug root.
inline constexpr std::string_view kDebugDirectory = "/usr/lib/debug";

// What .gnu_debuglink says.
struct DebugLink {
  std::string name; // a file name: no '/', not "." or ".."
  uint32_t crc = 0; // CRC-32 of the whole debug file
};

// The link in the content of a .gnu_debuglink section (name, NUL, padding to 4 bytes, CRC in the
// file's byte order, which is this machine's); nullopt if it is malformed or the name is not a
// plain file name of printable characters.
std::optional<DebugLink> parse_debug_link(std::string_view section);

// How a candidate is checked before it is taken.
enum class DebugCheck {
  kBuildId, // its build ID must be the ELF file's
  kCrc,     // its CRC-32 must be the link's
};

struct DebugCandidate {
  std::string path; // absolute, inside a debug root; no "." or ".." component
  DebugCheck check = DebugCheck::kBuildId;
};

// Where the debug file of an ELF file is looked for, in order, inside one debug root:
// /usr/lib/debug/.build-id/xx/rest.debug for build_id (raw bytes, at least 2); then, for link,
// <dir>/<name>, <dir>/.debug/<name> (only if beside_file: the root is the file's own) and
// /usr/lib/debug/<dir>/<name>, where <dir> is file_path's directory. file_path is the ELF file's
// path inside its root (as /proc/<pid>/maps shows it); one that is not absolute and clean (no
// "." or ".." component, no " (deleted)" suffix) gives no link candidates.
std::vector<DebugCandidate> debug_candidates(std::string_view file_path,
                                             std::string_view build_id,
                                             const std::optional<DebugLink>& link,
                                             bool beside_file);

// The GNU build ID's usual text: lowercase hex.
std::string hex(std::string_view bytes);

// The CRC-32 (ISO-HDLC, as zlib and .gnu_debuglink compute it) of the open file's first max_bytes;
// fails (EFBIG) if the file is larger.
[[nodiscard]] Result<uint32_t> file_crc32(int fd, uint64_t max_bytes);

// A directory tree searched for debug files.
struct DebugRoot {
  UniqueFd dir;      // an O_PATH directory that candidates resolve from
  uint64_t resolve;  // their RESOLVE_* flags: kResolveInRoot for a container's root
  std::string shown; // how errors name it, e.g. "/proc/4242/root"
  bool beside_file;  // the ELF file's own root: its directory is searched too
};

// The ELF file whose debug file is sought.
struct DebugQuery {
  std::string file_path; // inside its root, as /proc/<pid>/maps shows it
  std::string build_id;  // raw bytes; "" if it has none
  std::optional<DebugLink> link;
  dev_t device = 0; // the file's own identity: it is never its own debug file
  ino_t inode = 0;
};

struct DebugFile {
  UniqueFd fd;
  std::string path;  // the candidate's path inside its root
  std::string shown; // root and path, for messages
};

// The first candidate of query, root after root, that opens as a regular file inside its root
// and passes its check. Each candidate refused for a reason other than its absence is described
// in refused (one line each).
std::optional<DebugFile> find_debug_file(const std::vector<DebugRoot>& roots,
                                         const DebugQuery& query,
                                         std::vector<std::string>& refused);

} // namespace flamebpf::symbolize
