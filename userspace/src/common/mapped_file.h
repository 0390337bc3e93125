// Opening the file behind a mapping of a process, the one contained way (common/contained_file.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/elf_reader.h"
#include "common/proc_maps.h"
#include "common/result.h"
#include "common/unique_fd.h"

namespace flamebpf {

// The file behind mapping in the process whose /proc directory is process, opened for reading.
// First through map_files, which names the very file mapped whatever mount namespace or deletion
// hides its path; its entries are magic links, so they are opened O_PATH (which opens nothing for
// real: no device driver runs) and reopened only if regular. Else by the mapping's path inside
// the process's root, unless the file was deleted (the path may name another file by now). Either
// way the file must have the mapping's inode number: the range may have been remapped, or the path
// replaced, since the maps were read. The device is not compared: through an overlayfs path, the
// file shows the overlay's device, while the mapping shows the underlying one.
[[nodiscard]] Result<UniqueFd> open_mapped_file(const std::string& process,
                                                const procfs::Mapping& mapping);

// The ELF file behind mapping, opened as open_mapped_file opens it, and its reader, which reads
// through file (and so lives no longer than this), shown as the file inside the process's root.
struct MappedElf {
  UniqueFd file;
  uint64_t size = 0;                 // the file's, when opened
  std::shared_ptr<ReadRecord> reads; // what the reader read of it, if asked
  ElfReader elf;
};

// Opens mapping's file and reads its ELF headers, recording what is read of it if record_reads.
[[nodiscard]] Result<MappedElf> open_mapped_elf(const std::string& process,
                                                const procfs::Mapping& mapping,
                                                bool record_reads = false);

} // namespace flamebpf
