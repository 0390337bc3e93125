// What the symbolizer remembers of each sampled process: its name and its executable mappings,
// with each mapped ELF file opened. Captured when a process is first seen, so that a process that
// exits before the interval ends can still be symbolized.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/memory_account.h"
#include "common/proc_maps.h"
#include "common/stall_guard.h"
#include "profile/target_names.h"
#include "runtimes/runtime.h"
#include "symbolize/elf_symbols.h"
#include "symbolize/perf_map.h"

namespace flamebpf::symbolize {

class DebugFetcher;

// An executable mapping and the file behind it.
struct MappedCode {
  procfs::Mapping mapping;
  std::shared_ptr<const ElfSymbols> symbols; // null when the file could not be read
};

// A JIT's perf map as last read, for the agent's statistics.
struct PerfMapStatus {
  uint32_t pid = 0;
  std::string path;
  std::chrono::system_clock::time_point modified; // when the JIT last wrote it
  size_t entries = 0;
};

struct ProcessImage {
  std::string comm;
  std::vector<MappedCode> code; // sorted by start address
  bool maps_read = false;       // false when /proc/<pid>/maps could not be read (process gone)
  uint32_t ns_pid = 0;          // pid inside the process's own pid namespace; 0 if unknown
  std::string cgroup;           // cgroup2 path when first captured ("/docker/<id>"); may be ""
  uint64_t cgroup_id = 0;       // cgroup2 id its first sample was taken in; 0 if not known
  // Its target's share of the memory account (common/memory_account.h), which pays for its perf
  // map, unwind records and the ELF files it is first to map; chosen when its cgroup is read.
  std::shared_ptr<MemoryShare> share;
  uint64_t capture_generation = 0;
  // Captured inside execve, after the new memory image was made but before any code was mapped
  // into it: the next address looked up captures it again, whatever the generation.
  bool captured_mid_exec = false;
  uint64_t first_capture_generation = 0;
  // An address of a sample fell outside every mapping in the generation the image was first
  // captured in, when its maps may not be read again: it was captured while its loader was still
  // mapping code (libraries, or the runtime a launcher loads), and is read again at the
  // generation's end, so that what it mapped since counts even if no later sample asks (a JVM that
  // waits as it starts).
  bool read_again = false;
  bool found_exited = false;    // at the end of a generation
  uint64_t used_generation = 0; // last generation a sample of this image was symbolized in
  // The JIT's perf map; opened when a runtime asks (at capture, so that it outlives the process),
  // else on the first address in anonymous code.
  std::shared_ptr<PerfMapReader> perf_map;
  uint64_t perf_map_generation = 0; // generation perf_map was last refreshed in
  // A refresh of perf_map that stalled (its file system does not answer) and is still running:
  // until it ends, the reader is its and the map names nothing.
  std::optional<std::shared_future<bool>> perf_map_stalled;

  // Whether perf_map may be used now: there is one and no stalled refresh holds it.
  bool perf_map_usable();

  // The mapping containing address, if any.
  const MappedCode* find(uint64_t address) const;
};

// The symbols of ELF files, shared by every process that maps them, keyed by file identity. No
// file stays open: ElfSymbols reads what it needs and closes it.
class ElfCache {
public:
  // The cache reads processes below proc_root and holds at most max_held_bytes of symbols, of
  // them at most unused_kept_bytes of files no process maps; a demangled name no frame used for a
  // names_period is forgotten within the next.
  explicit ElfCache(std::string proc_root,
                    size_t max_held_bytes = kMaxHeldBytes,
                    size_t unused_kept_bytes = kUnusedKeptBytes,
                    std::chrono::steady_clock::duration names_period = kNamesPeriod)
      : proc_root_(std::move(proc_root)), max_held_bytes_(max_held_bytes),
        unused_kept_bytes_(unused_kept_bytes), names_period_(names_period)
  {
  }

  struct FileKey {
    uint64_t device = 0;
    uint64_t inode = 0;
    friend auto operator<=>(const FileKey&, const FileKey&) = default;
  };
  // The symbols of the file behind mapping in process pid, opening it on first use and charging
  // it to share (the first process's target pays for a file every process shares; nothing is
  // charged without one).
  std::shared_ptr<const ElfSymbols> get(uint32_t pid,
                                        const procfs::Mapping& mapping,
                                        const std::shared_ptr<MemoryShare>& share = nullptr);
  size_t size() const { return files_.size(); }
  // The symbol tables held: one for all the copies of a file.
  size_t tables() const;
  // The memory the cached symbols and inline indexes take, roughly.
  size_t held_bytes() const { return held_bytes_; }
  // Forgets the tables no process holds beyond the most recently used kUnusedKept, or
  // unused_kept_bytes of them (a table serves every copy of its file), the demangled names no
  // frame used for a names period, and old failures: on a host that keeps starting new binaries
  // and containers, and whose processes wander through their code, the cache stays bounded.
  void trim();
  // Debug files no debug root holds are asked of fetcher from now on.
  void fetch_debug_files_with(std::shared_ptr<DebugFetcher> fetcher)
  {
    fetcher_ = std::move(fetcher);
  }
  // Forgets the files whose build ID (hex) is build_id: their debug file arrived.
  void forget_build_id(const std::string& build_id);
  // Forgets the files whose table found a name changed since it was read; true if any.
  bool forget_changed();
  // Files found, before being read, to be copies of a file whose table is held (ElfSymbols::reads),
  // so named by that table without being read.
  uint64_t copies_replayed() const { return copies_replayed_; }
  // Copies of one file tried before a file is read, at most: a target could make many files of
  // one size.
  static constexpr size_t kMaxCopiesTried = 4;
  // The guard that names still in a target's file are read in, as the files are.
  StallGuard& name_guard() { return stall_guard_; }
  // Gives the files whose inline index was built since the last call their index (one line for
  // what a build cut or refused). A file read while kMaxQueued builds wait gets none.
  void install_inlines();
  // Inline index builds queued or under way.
  size_t inline_builds_pending() const { return indexer_ ? indexer_->pending() : 0; }
  // The builds go on at the caller's priority (InlineIndexer::hurry).
  void hurry_inline_builds()
  {
    if (indexer_)
      indexer_->hurry();
  }

  static constexpr size_t kUnusedKept = 64;
  // Enough for short-lived processes' usual files (a shell's, a libc's); a JVM's libjvm alone
  // takes more, and reading it again takes tens of milliseconds.
  static constexpr size_t kUnusedKeptBytes = size_t{4} << 20;
  static constexpr size_t kFailuresKept = 1024;
  // Long enough that the names of code that runs now and then (a timer's, a GC's) stay, short
  // enough that those of a start or a burst are given back.
  static constexpr std::chrono::steady_clock::duration kNamesPeriod = std::chrono::seconds(60);
  // The symbols of all cached files together: past it, files no process holds are forgotten, and
  // if that is not enough, further files are not read (each file has its own budgets, but a
  // container could map hundreds).
  static constexpr size_t kMaxHeldBytes = size_t{1} << 30;
  // How long reading one file (and its debug file) may go without progress before the cache goes
  // on without it.
  static constexpr std::chrono::milliseconds kStallLimit{1000};

private:
  using OpenedSymbols = Result<std::shared_ptr<const ElfSymbols>>;
  // Caches what opening key gave (or remembers the failure); what get() returns.
  std::shared_ptr<const ElfSymbols> keep(const FileKey& key,
                                         const OpenedSymbols& opened,
                                         const std::string& shown,
                                         const std::shared_ptr<MemoryShare>& share);
  // One table of symbols, held for every copy of its file: copies of one file in several
  // containers' images are different files to the kernel, and each would hold the same table.
  struct Held {
    std::shared_ptr<const ElfSymbols> symbols;
    size_t bytes = 0;        // symbol_bytes, and its inline index's once built
    size_t symbol_bytes = 0; // symbols->memory_bytes(), when cached and as names were read since
    MemoryCharge charge;     // the symbols' bytes, charged to the share of the first process that
                             // mapped a copy
    MemoryCharge inline_charge; // its inline index's bytes, to the same share
  };
  struct Cached {
    std::shared_ptr<Held> held; // shared by the file's copies
    uint64_t last_use = 0;
  };
  // Charges the names each table read since it was cached or last charged, and gives back what
  // it forgot; first, with forget_unused_names, each table forgets the names no frame used since
  // the last time.
  void charge_names_read(bool forget_unused_names);
  // The held table that names every byte as symbols does, if any.
  std::shared_ptr<Held> held_alike(const ElfSymbols& symbols, uint64_t content_hash) const;
  // The files no process holds (only the cache holds their table), with their last use.
  std::vector<std::pair<uint64_t, FileKey>> unused_files() const;
  // Forgets files no process holds, least recently used first, until bytes are freed.
  void evict_unused(size_t bytes);
  // Forgets one file; returns the bytes it held (none while another copy's key holds them).
  size_t erase(const FileKey& key);
  // Queues the build of the inline index of a file just read, if it has DWARF and no file of its
  // build ID has it built or queued already.
  void queue_inlines(const FileKey& key, const std::shared_ptr<const ElfSymbols>& symbols);
  // Gives the cached file key, whose symbols the caller holds, its inline index if the budget of
  // held bytes has room for it. An index shared by copies of one file is counted for each: the
  // budget errs on the safe side.
  void use_inlines(const FileKey& key, const std::shared_ptr<const InlineIndex>& index);

  std::string proc_root_;
  size_t max_held_bytes_;
  size_t unused_kept_bytes_;
  std::chrono::steady_clock::duration names_period_;
  std::chrono::steady_clock::time_point names_forgotten_ = std::chrono::steady_clock::now();
  std::shared_ptr<DebugFetcher> fetcher_;
  std::map<FileKey, Cached> files_;
  std::unordered_map<uint64_t, std::weak_ptr<Held>> held_by_content_; // by content_hash()
  // The tables a copy of their file can share without reading it (those with reads()), by file
  // size; replaced, not changed, when one is added, as a read under way holds the one it began
  // with.
  using CopyIndex = std::unordered_multimap<uint64_t, std::weak_ptr<const ElfSymbols>>;
  std::shared_ptr<const CopyIndex> copy_index_ = std::make_shared<CopyIndex>();
  // The table of which the file fd is a copy, if copies holds one (tried against its reads).
  static std::shared_ptr<const ElfSymbols> copy_of(int fd, const CopyIndex& copies);
  // Adds symbols (if given) to copy_index_, and leaves out the tables no longer held by anyone
  // or found changed.
  void index_copies_of(const std::shared_ptr<const ElfSymbols>& symbols);
  uint64_t copies_replayed_ = 0;
  std::map<FileKey, uint64_t> failed_; // files that could not be opened, not retried
  // Files their target's share had no room for: tried again after the next trim().
  std::set<FileKey> over_share_;
  // Files found changed since read, said once each.
  std::set<FileKey> changed_;
  uint64_t uses_ = 0; // a clock of get() calls, for last_use
  size_t held_bytes_ = 0;
  bool full_reported_ = false; // kMaxHeldBytes was reached, and that was said
  // Files whose reading stalled and goes on; taken when it ends.
  std::map<FileKey, std::shared_future<OpenedSymbols>> stalled_;
  StallGuard stall_guard_{kStallLimit};
  // Made when the first file with DWARF is read: its thread is needed only then.
  std::unique_ptr<InlineIndexer> indexer_;
  // A build, for every file read meanwhile that has its build ID (copies of one library in many
  // containers, say): each file is indexed once.
  struct InlineJob {
    std::string build_id; // hex; "" if the file has none
    // The files waiting for it; one evicted meanwhile (its symbols gone) is skipped.
    std::vector<std::pair<FileKey, std::weak_ptr<const ElfSymbols>>> files;
  };
  std::map<uint64_t, InlineJob> inline_jobs_; // by the indexer's key
  std::map<std::string, uint64_t> inline_job_of_build_id_;
  // Built indexes, by build ID, while a file uses them.
  std::map<std::string, std::weak_ptr<const InlineIndex>> inline_indexes_;
  uint64_t next_inline_job_ = 0;
};

// One process between two execs.
struct ImageKey {
  uint32_t pid = 0;
  uint32_t image_id = 0;
  friend bool operator==(const ImageKey&, const ImageKey&) = default;
};

// What /proc said of a process when its first sample was announced (a few small reads, no ELF
// file opened): kept for a capture that comes later, when flamebpf was busy and a short-lived
// process may be gone.
struct ProcessSnapshot {
  std::optional<std::string> maps; // /proc/<pid>/maps as read then; nullopt if it could not be
  std::string comm;
  uint32_t ns_pid = 0;
  std::string cgroup;
  size_t bytes() const { return (maps ? maps->size() : 0) + comm.size() + cgroup.size(); }
};

struct ImageKeyHash {
  size_t operator()(const ImageKey& key) const
  {
    return std::hash<uint64_t>()((uint64_t(key.pid) << 32) | key.image_id);
  }
};

class ProcessTable {
public:
  // proc_root is normally "/proc"; tests may point it elsewhere. What targets make the table
  // hold is charged to account (one of MemoryAccount::kDefaultTotalBytes when null).
  explicit ProcessTable(std::string proc_root = "/proc",
                        std::shared_ptr<MemoryAccount> account = nullptr);

  // The targets whose shares processes are charged to from now on (by the cgroup and pid each
  // process has when its cgroup is read); until the first call, every process is in
  // targets.unmatched's share.
  void set_targets(profile::TargetNames targets) { targets_ = std::move(targets); }
  const MemoryAccount& memory_account() const { return *account_; }

  // Reads the process's maps and opens its code; comm may be empty to read it from /proc, and
  // cgroup_id (that of the first sample) 0 when not known. What /proc no longer has (the process
  // exited) is taken from the snapshot kept for it, if any.
  void capture(const ImageKey& key, const std::string& comm, uint64_t cgroup_id = 0);
  // Keeps what /proc says of the process now for its capture, which may come after it exited.
  // Snapshots hold kMaxSnapshotBytes at most; beyond that, a process is read at its capture only.
  void keep_snapshot(const ImageKey& key);
  // /proc's maps, comm, pid namespace pid and cgroup of pid now (no ELF file opened).
  ProcessSnapshot read_snapshot(uint32_t pid) const;
  static constexpr size_t kMaxSnapshotBytes = 64 << 20;
  // The process image, capturing it now if it was never seen.
  const ProcessImage& get(const ImageKey& key);
  // The process image if known, without capturing it.
  const ProcessImage* find(const ImageKey& key) const;
  // The runtimes (runtimes/runtime.h) told of each capture and forgotten image, in the order the
  // symbolizer asks them.
  void add_runtime(std::unique_ptr<runtimes::Runtime> runtime)
  {
    runtimes_.push_back(std::move(runtime));
  }
  const std::vector<std::unique_ptr<runtimes::Runtime>>& runtimes() const { return runtimes_; }
  // The targets' names as set_targets last gave them.
  const profile::TargetNames& targets() const { return targets_; }
  // The generation (interval) now: what is read at most once per generation compares with it.
  uint64_t generation() const { return generation_; }
  // Re-reads the maps of a live process whose address fell outside every known mapping; at
  // most once per generation (interval), so a process with unknown code costs one re-read. One
  // read in this generation already is read again at its end.
  const ProcessImage& refresh(const ImageKey& key);
  // The symbols of code, a mapping of key's image: those found at capture, else those of a file
  // whose reading stalled then and has ended since; null if none.
  const ElfSymbols* symbols_of(const ImageKey& key, const MappedCode& code);
  // The process's perf map, read up to now (at most one refresh per generation); null if the
  // process's pid namespace cannot be known.
  const PerfMapTable* perf_map(const ImageKey& key);
  // The entry of key's perf map (as perf_map() reads it) holding address, if any.
  std::optional<PerfMapTable::Entry> perf_map_entry(const ImageKey& key, uint64_t address);
  // The perf maps found so far, of processes still known.
  std::vector<PerfMapStatus> perf_maps() const;
  // Opens key's perf map now if it is not open (and its pid namespace is known), and reads what
  // was appended to it: a map opened while its process lives is readable to its end after it
  // exits.
  void read_perf_map(const ImageKey& key);
  // The perf map of process pid was rewritten in place: its next refresh reads it from its start.
  void reread_perf_map(uint32_t pid);
  // Debug files no debug root holds are fetched by fetcher; once one arrives, the files it is
  // for are read again (at the end of a generation), so that later intervals name their frames.
  void fetch_debug_files_with(std::shared_ptr<DebugFetcher> fetcher);
  // Takes what arrived since the last call: the debug files fetched (the files they are for are
  // read again on their next use) and the inline indexes built.
  void take_arrivals();
  // Inline index builds queued or under way.
  size_t inline_builds_pending() const { return elf_cache_.inline_builds_pending(); }
  // The builds go on at the caller's priority (InlineIndexer::hurry).
  void hurry_inline_builds() { elf_cache_.hurry_inline_builds(); }
  // The guard to read names in that ElfSymbols left in a target's file (match_file_offset).
  StallGuard* name_guard() { return &elf_cache_.name_guard(); }
  // Starts a new generation (taking what arrived first), which is also a new interval for the perf
  // maps' budgets, and removes the images of processes that no longer exist, and images replaced by
  // an exec that no sample used in the generation; returns their keys, which every runtime forgets.
  // The images a runtime wants read again (a launcher that loads the runtime later), and those
  // whose code a sample missed in the generation they were read in, are captured again.
  std::vector<ImageKey> end_generation();

  const std::string& proc_root() const { return proc_root_; }
  size_t size() const { return processes_.size(); }
  size_t elf_files() const { return elf_cache_.size(); }
  size_t symbol_tables() const { return elf_cache_.tables(); }
  size_t symbol_bytes() const { return elf_cache_.held_bytes(); }

  // How long a perf map's refresh may go without progress before the table goes on without it.
  static constexpr std::chrono::milliseconds kStallLimit{1000};
  // Images whose maps are read again at the end of a generation, at most: a real launcher loads
  // its runtime within a second, so only one that waits stays one; and an image read again for a
  // missed address is read in every later generation its samples ask.
  static constexpr size_t kMaxRecaptures = 32;

private:
  // Opens image's perf map if it is not open; false if its pid namespace cannot be known.
  bool open_perf_map(const ImageKey& key, ProcessImage& image);
  // Refreshes image's perf map through the stall guard; one line if it stalls.
  void refresh_perf_map(ProcessImage& image);
  // Runs work on image's perf map reader (whose reads are of the target's file) in the stall
  // guard's worker; false if it did not finish: too many reads are stalled, or this one stalled
  // (one line; the map is not used until it answers).
  bool read_perf_map_file(ProcessImage& image, const std::function<void(PerfMapReader&)>& work);

  std::string proc_root_;
  std::shared_ptr<MemoryAccount> account_;
  profile::TargetNames targets_;
  std::unordered_map<ImageKey, ProcessImage, ImageKeyHash> processes_;
  std::unordered_map<ImageKey, ProcessSnapshot, ImageKeyHash> snapshots_; // until the capture
  size_t snapshot_bytes_ = 0;
  StallGuard stall_guard_{kStallLimit};
  ElfCache elf_cache_;
  std::vector<std::unique_ptr<runtimes::Runtime>> runtimes_;
  uint64_t generation_ = 1;
  std::shared_ptr<DebugFetcher> fetcher_;
};

} // namespace flamebpf::symbolize
