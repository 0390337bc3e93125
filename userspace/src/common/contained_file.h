// Reading files that belong to a container, which flamebpf must not trust: a path is resolved as
// if the container's root were "/", so no symlink or ".." leads out of it, and only regular files
// are read, so a FIFO or device planted in their place cannot block or flood the reader.
#pragma once

#include <cstddef>
#include <string>

#include "common/result.h"
#include "common/unique_fd.h"

namespace flamebpf {

// Opens path (absolute or relative, interpreted inside root) for reading. root is a directory such
// as /proc/<pid>/root. Fails on anything but a regular file.
[[nodiscard]] Result<UniqueFd> open_contained(const std::string& root, const std::string& path);

// The first max_bytes of the regular file at path inside root; error_if_larger makes a larger file
// an error instead of a truncated read.
[[nodiscard]] Result<std::string> read_contained(const std::string& root,
                                                 const std::string& path,
                                                 size_t max_bytes,
                                                 bool error_if_larger = true);

} // namespace flamebpf
