// Loads the unwind tables of the processes the sampler meets: reads a new process image's maps,
// builds (or finds) the table of each executable file it maps, and installs the image's mappings
// in the sampler's maps (TableMaps). A table is shared by every image that maps a file with the
// same CFI (CfiTable::content_key), counted by the images that use it, and freed when the last
// one is forgotten. Until its mappings are installed, and when none of its files has rows, an
// image is unwound by the kernel's frame-pointer walker.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/exported_objects.h"
#include "common/memory_account.h"
#include "common/proc_maps.h"
#include "common/read_record.h"
#include "common/result.h"
#include "common/stall_guard.h"
#include "unwind/row_space.h"
#include "unwind/table_maps.h"
#include "unwind/unwind_table.h"

namespace flamebpf::unwind {

using flamebpf::LoadSegment;

// One code file's table, as a builder hands it to the loader.
struct FileTable {
  UnwindTable table;                 // rows relative to table.base_address, an ELF virtual address
  uint64_t content_key = 0;          // equal only for equal tables (CfiTable::content_key)
  std::vector<LoadSegment> segments; // the file's PT_LOAD segments
  // What was wrong with the file's CFI, for the one log line per file ("" if nothing): parts
  // of it were malformed or cut, and the code they describe is unwound by the frame pointer.
  std::string trouble;
  // What the build read of the file: another file that replays it is a copy, whose table is this
  // one (ReadRecord). Null if the builder keeps no record.
  std::shared_ptr<const ReadRecord> reads;
  // Found a copy before being read: table is empty, and its rows are those of the table held
  // for content_key.
  bool copy = false;
};

// Builds the table of the file behind mapping in the process whose /proc directory is
// process_dir ("[vdso]" included).
using FileTableBuilder =
    std::function<Result<FileTable>(const std::string& process_dir, const procfs::Mapping&)>;

// The builder flamebpf uses: the mapped file opened the contained way (common/mapped_file.h) and
// its CFI read by build_cfi_table; the vDSO from flamebpf's own, which every process shares.
[[nodiscard]] Result<FileTable> build_file_table(const std::string& process_dir,
                                                 const procfs::Mapping& mapping);

// What the loader did, for the statistics and tests.
struct LoaderCounts {
  uint64_t files_built = 0;      // tables built from a file
  uint64_t files_shared = 0;     // mappings whose table another file's (or image's) already held
  uint64_t files_replayed = 0;   // of them, files found copies before their CFI was read
  uint64_t files_failed = 0;     // files whose table could not be built (logged once per file)
  uint64_t files_malformed = 0;  // files whose CFI is partly malformed (logged once per file)
  uint64_t files_no_room = 0;    // tables left out because the row array was full
  uint64_t files_stalled = 0;    // files whose reading overran kStallLimit (logged once per file)
  uint64_t images_installed = 0; // images whose mappings went to the sampler (again after a miss)
  uint64_t maps_rereads = 0;     // maps read again after the program met an unknown pc
  // Rereads that found no executable mapping the last read had not (the pc was no code: a stack
  // gone wrong), and misses let pass without a reread after them.
  uint64_t maps_rereads_fruitless = 0;
  uint64_t misses_let_pass = 0;
};

class TableLoader {
public:
  // A file whose reading takes longer (its file system stalls) is left to finish on its own; its
  // code is unwound by the frame pointer until it has, so no target's file can hold up sampling.
  static constexpr std::chrono::milliseconds kStallLimit{1000};
  // Files remembered without a table (no rows, failed, or malformed and logged): beyond this many,
  // they are forgotten and read again if mapped again.
  static constexpr size_t kMaxKnownFiles = 4096;
  // Copies of one file tried before a file's CFI is read, at most: a target could make many
  // files of one size.
  static constexpr size_t kMaxCopiesTried = 4;

  // maps must outlive the loader. proc_root is "/proc" but in tests.
  explicit TableLoader(TableMaps& maps,
                       std::string proc_root = "/proc",
                       FileTableBuilder builder = build_file_table);

  // A process image's first sample: load the tables of its executable mappings and install them.
  void on_process_seen(uint32_t pid, uint32_t image_id);
  // The same, later: queues the image for load_queued(). Reading a process's files and their CFI
  // can take tens of milliseconds; the pipeline does it between drains, not in its notice handler.
  void queue_process(uint32_t pid, uint32_t image_id);
  // Loads queued images, oldest first, until none is left or the deadline has passed (each image
  // is loaded whole). Returns whether some are still queued.
  bool load_queued(std::chrono::steady_clock::time_point deadline);
  // The program met a pc of the image outside its installed mappings (a library loaded since):
  // its maps are read again. The pipeline calls this at most once per image and drain. Every
  // executable mapping is installed, those without tables too, so only a new mapping or a pc that
  // is no code makes a miss; after a reread that found nothing new, the next misses are let pass
  // (1, 3, 7, then kMaxMissesLetPass), since a process whose unwinding meets garbage would
  // otherwise have its maps read at every drain.
  void on_mapping_missed(uint32_t pid, uint32_t image_id);
  static constexpr uint32_t kMaxMissesLetPass = 15;
  // The image exited: its mappings leave the sampler and the tables no other image uses are
  // freed.
  void forget_image(uint32_t pid, uint32_t image_id);

  // The image's CPython frames are walked by walk from now on; none: no longer.
  [[nodiscard]] Result<>
  set_cpython_walk(uint32_t pid, uint32_t image_id, const fb_cpython_process* walk)
  {
    return maps_.set_cpython_walk(fb_image_key{pid, image_id}, walk);
  }

  // Installs (or replaces) a table for the code at [start, end) of a process image, such as a
  // runtime's JIT code: table.base_address is the absolute address of pc_offset 0 (no load
  // bias). The new rows are written before the image points at them, so a sample sees the old
  // table or the new, whole; then the old rows are freed. Fails if the rows do not fit.
  [[nodiscard]] Result<> install_code_table(
      uint32_t pid, uint32_t image_id, uint64_t start, uint64_t end, const UnwindTable& table);
  // Removes the table installed for the code at start, if any.
  void remove_code_table(uint32_t pid, uint32_t image_id, uint64_t start);

  // What the loader holds in userspace (its bookkeeping of files, tables and images, and the
  // free runs of the row array; the rows themselves are in the kernel maps, reported apart) is
  // measured in account from now on, at each measure(). Measured, not charged: the kernel maps'
  // capacity (--unwind-memory) bounds it, and the loader knows processes, not targets.
  void measure_memory(std::shared_ptr<MemoryAccount> account);
  // Measures what the loader holds again: once per interval, as walking it costs.
  void measure();

  const LoaderCounts& counts() const { return counts_; }
  // A file table whose last image is forgotten stays in the maps, idle, while the idle ones
  // hold at most this many rows (or until room is needed): a program run again and again (a
  // health check, a probe's runc, a script's tools) would otherwise have its files' tables built
  // at every run.
  static constexpr uint32_t kMaxIdleRows = 1 << 16;

  // Tables in use in the sampler's maps now (file tables, shared ones once, and code tables).
  size_t live_tables() const;
  // Idle file tables, and the rows they hold.
  size_t idle_tables() const { return idle_.size(); }
  uint32_t idle_rows() const { return idle_rows_; }
  // Images that use the file table with this content key.
  uint32_t table_users(uint64_t content_key) const;
  // Rows taken in the row array by tables in use (idle ones not counted).
  uint32_t rows_used() const { return rows_.used() - idle_rows_; }
  // Process images the loader follows (with tables installed or not).
  size_t images() const { return images_.size(); }
  // Files (device and inode) whose table the loader remembers.
  size_t known_files() const { return files_.size(); }

private:
  using ImageKey = std::pair<uint32_t, uint32_t>; // pid, image_id
  using FileKey = std::pair<uint64_t, uint64_t>;  // device, inode
  struct Placed {                                 // rows of one table in the sampler's maps
    uint32_t slot = 0;
    uint32_t first_row = 0;
    uint32_t row_count = 0;
  };
  struct SharedTable {
    Placed placed;
    uint64_t base_address = 0;
    uint32_t users = 0; // images
  };
  struct KnownFile {
    uint64_t content_key = 0;
    std::vector<LoadSegment> segments;
    bool has_rows = false; // false: a table of the frame pointer only, never installed
  };
  struct CodeTable {
    uint64_t end = 0;
    uint64_t base_address = 0;
    Placed placed;
  };
  struct Range {
    uint64_t start = 0;
    uint64_t end = 0;
    bool operator==(const Range&) const = default;
  };
  struct Image {
    std::vector<fb_unwind_mapping> file_mappings;
    // Executable code the last read found with no table to come (anonymous code, files with no
    // rows or that failed), merged where adjacent: installed so that its pcs are no misses.
    std::vector<Range> without_tables;
    // The last read left a file to come (stalled, or no room yet): a miss reads the maps again.
    bool tables_to_come = false;
    uint32_t misses_to_let_pass = 0;
    uint32_t fruitless_rereads = 0;
    std::set<uint64_t> content_keys;    // the shared tables it holds a use of
    std::map<uint64_t, CodeTable> code; // by start
  };
  // Device and inode of the mapped file ((~0, 0) for the vDSO).
  static FileKey file_key(const procfs::Mapping& mapping);

  // Reads the image's maps and (re)installs it.
  void load_image(const ImageKey& key, Image& image);
  // The table for mapping, built or found; nullptr if it has no rows or cannot be had.
  const KnownFile* file_for(const std::string& process_dir, const procfs::Mapping& mapping);
  // The builder's answer for the file, read under the stall guard; nullopt while it stalls.
  std::optional<Result<FileTable>>
  build_guarded(const FileKey& key, const std::string& process_dir, const procfs::Mapping& mapping);
  // Keeps what was built for the file (or its failure) and places its rows.
  const KnownFile*
  keep_file(const FileKey& key, const procfs::Mapping& mapping, Result<FileTable> built);
  // Places rows in the maps; nullopt (counted and logged once) if they do not fit.
  std::optional<Placed> place(const UnwindTable& table, const std::string& shown);
  void release(const Placed& placed);
  // An image no longer uses the table: with no user left, it goes idle (or is freed).
  void release_use(uint64_t content_key);
  // A table used again leaves the idle ones.
  void reuse(uint64_t content_key, SharedTable& table);
  // Frees idle tables, the longest idle first, until they hold at most max_rows.
  void trim_idle(uint32_t max_rows);
  // Frees the table and forgets the files behind it.
  void free_table(uint64_t content_key);
  // The tables a copy of their file can share without its CFI being read, by file size: what the
  // build of one of the files read, and what it made but the rows. Replaced, not changed, as a
  // build under way holds the one it began with.
  struct CopyOrigin {
    std::shared_ptr<const ReadRecord> reads;
    uint64_t content_key = 0;
    std::vector<LoadSegment> segments;
    std::string trouble;
  };
  using CopyIndex = std::unordered_multimap<uint64_t, std::shared_ptr<const CopyOrigin>>;
  // The table of which the file behind mapping is a copy, if copies holds one.
  static std::optional<FileTable>
  copy_of(const std::string& process_dir, const procfs::Mapping& mapping, const CopyIndex& copies);
  // Makes copy_index_ again from the tables held, with built's if given.
  void index_copies(const FileTable* built);
  // Writes the image's mappings to the maps, or removes it when it has none.
  void install(const ImageKey& key, const Image& image);

  TableMaps& maps_;
  std::string proc_root_;
  FileTableBuilder builder_;
  RowSpace rows_;
  std::vector<uint32_t> free_slots_;
  std::map<FileKey, KnownFile> files_;
  std::set<FileKey> failed_files_;
  std::set<FileKey> reported_files_; // malformed CFI already logged
  std::map<FileKey, std::shared_future<Result<FileTable>>> stalled_files_;
  std::unordered_map<uint64_t, SharedTable> tables_; // by content key
  std::shared_ptr<const CopyIndex> copy_index_ = std::make_shared<CopyIndex>();
  std::deque<uint64_t> idle_; // content keys, the longest idle first
  uint32_t idle_rows_ = 0;
  std::map<ImageKey, Image> images_;
  std::deque<ImageKey> queued_;
  LoaderCounts counts_;
  bool full_logged_ = false;
  MemoryCharge memory_;
  // Last: destroyed first, so that its worker is done before the members it may still use go.
  StallGuard stall_guard_{kStallLimit};
};

} // namespace flamebpf::unwind
