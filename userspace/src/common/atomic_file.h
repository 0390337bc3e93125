// Writes a file so that readers see either the old content or the whole new content, never part.
#pragma once

#include <functional>
#include <ostream>
#include <string>

#include "common/result.h"

namespace flamebpf {

// Calls write_content on a stream to a temporary file beside path, flushes it to disk, and
// renames it over path. On any failure the temporary file is removed and path is untouched.
// A path that exists and is not a regular file (/dev/null, a FIFO) is written in place.
[[nodiscard]] Result<>
write_file_atomically(const std::string& path,
                      const std::function<Result<>(std::ostream&)>& write_content);

} // namespace flamebpf
