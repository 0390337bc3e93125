// The calls Go's compiler inlined, read from a binary's pclntab (runtimes/go/pclntab.h) the first
// time a frame in a function needs them: a stripped Go binary has no DWARF, but Go's own tracebacks
// need the inline tree, so every Go binary keeps it, and the pclntab is an index of it already. A
// Go daemon's tree is hundreds of thousands of call ranges (Debian's dockerd: 192,284, 5.0 MiB when
// held as an index like DWARF's); a profile meets a few hundred of its functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/elf_reader.h"
#include "common/stall_guard.h"
#include "common/unique_fd.h"
#include "runtimes/go/pclntab.h"
#include "symbolize/dwarf_inlines.h"

namespace flamebpf::symbolize {

// The trees read and held of one binary at most; past it, all are let go and read again as
// frames need them (a function's takes microseconds). One lookup in each of dockerd's functions
// would hold 20 MiB.
inline constexpr size_t kMaxGoInlineTreeBytes = 1 << 20;

class GoInlineTree {
public:
  // The tree of the Go binary fd (a descriptor of its own is kept); null if fd is no Go binary or
  // its pclntab cannot be read (problems says why).
  static std::unique_ptr<GoInlineTree>
  open(int fd, const std::string& shown, std::vector<std::string>& problems);

  // The calls inlined at the link-time address, outermost first, as InlineIndex::at gives them.
  // The first lookup in a function reads its tree from the file, in guard if given (a target's
  // file can stall; until it answers, lookups in functions not yet read find nothing). Names live
  // until the next lookup.
  std::vector<InlineIndex::Inlined> at(uint64_t address, StallGuard* guard) const;
  // The functions' trees read so far, and the function table, roughly.
  size_t memory_bytes() const;

private:
  struct FunctionTree {
    std::vector<go::PcValueRun> runs; // of the index of each pc's innermost call, -1 for none
    std::vector<go::Pclntab::InlinedCall> calls;
  };
  // What a read needs, shared with it: after a stall it may end after this is gone. One read at a
  // time: the pclntab's windows are not for two.
  struct Table {
    std::mutex mutex;
    UniqueFd fd;
    std::unique_ptr<ElfReader> reader;
    std::optional<go::Pclntab> pclntab;
  };
  explicit GoInlineTree(std::shared_ptr<Table> table) : table_(std::move(table)) {}

  std::shared_ptr<Table> table_;
  size_t functions_held_ = 0; // the pclntab's function table, in bytes
  // By function index; a function without inlined calls has an empty tree.
  mutable std::unordered_map<size_t, FunctionTree> functions_;
  mutable size_t tree_bytes_ = 0;
  // Reads of the trees, one at a time.
  mutable GuardedReads<FunctionTree> tree_reads_;
};

} // namespace flamebpf::symbolize
