// Decompression of xz data from a target (MiniDebugInfo, an ELF file's .gnu_debugdata), bounded in
// what it outputs and in the decoder's memory: a few kilobytes of xz can expand to gigabytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace flamebpf::symbolize {

// The decompressed bytes of the xz stream input. Fails (EFBIG) if they are more than max_output
// bytes: the data is useless cut (an ELF image's section headers are at its end). The size is
// known before anything is held (from the stream's index, else by decoding it once into nothing),
// so a bomb costs no memory and the output is allocated once. The decoder refuses a stream whose
// dictionary needs more than max_memory bytes (xz -6, the default, needs 9 MiB).
[[nodiscard]] Result<std::string>
xz_decompress(std::string_view input, size_t max_output, uint64_t max_memory);

} // namespace flamebpf::symbolize
