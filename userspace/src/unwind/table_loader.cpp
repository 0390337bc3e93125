#include "unwind/table_loader.h"

#include <algorithm>
#include <elf.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/contained_file.h"
#include "common/elf_reader.h"
#include "common/hashing.h"
#include "common/log.h"
#include "common/mapped_file.h"
#include "common/proc_maps.h"
#include "common/procfs.h"
#include "unwind/cfi_table.h"
#include "unwind/go_table.h"

namespace flamebpf::unwind {
namespace {

// A process's maps are a few KiB; a JIT runtime's with many threads, a few hundred.
constexpr size_t kMaxMapsBytes = 4 << 20;

// Go's own rows (go_table.h) merged into cfi's table, if elf is a Go binary; what went wrong is
// added to trouble.
void add_go_rows(const ElfReader& elf, CfiTable& cfi, std::string& trouble)
{
  auto pclntab = go::Pclntab::open(elf);
  if (!pclntab) {
    trouble = pclntab.error().message + ": its Go frames unwind by the frame pointer";
    return;
  }
  if (!*pclntab)
    return;
  GoRows go = go_rows(**pclntab, elf);
  auto merged = merge_rows(cfi.table, go, kMaxCfiRows);
  if (!merged) {
    trouble = "its Go functions' rows do not fit a table: they unwind by the frame pointer";
    return;
  }
  cfi.table = std::move(*merged);
  SipHash hash(content_hash_key());
  hash.update(cfi.content_key);
  for (const auto& row : cfi.table.rows)
    hash.update(std::string_view(reinterpret_cast<const char*>(&row), sizeof row));
  cfi.content_key = hash.finish();
  if (go.malformed > 0)
    trouble = std::to_string(go.malformed) + " of its " + std::to_string(go.functions) +
              " Go functions have malformed records or pcsp tables";
}

Result<FileTable> table_of(const ElfReader& elf)
{
  auto cfi = build_cfi_table(elf);
  if (!cfi)
    return fail(cfi.error());
  FileTable built;
  add_go_rows(elf, *cfi, built.trouble);
  built.table = std::move(cfi->table);
  built.content_key = cfi->content_key;
  const auto& counts = cfi->counts;
  if (counts.fdes_malformed > 0)
    built.trouble += std::string(built.trouble.empty() ? "" : "; ") +
                     std::to_string(counts.fdes_malformed) + " of its " +
                     std::to_string(counts.fdes) + " FDEs in " + cfi->section + " are malformed";
  if (counts.section_cut)
    built.trouble += std::string(built.trouble.empty() ? "" : "; ") + "its " + cfi->section +
                     " is larger than " + std::to_string(kMaxCfiSectionBytes >> 20) + " MiB";
  built.segments = load_segments(elf);
  return built;
}

// The vDSO is the same image in every process: flamebpf reads its own, once.
Result<FileTable> vdso_table()
{
  static const Result<FileTable> built = []() -> Result<FileTable> {
    std::string_view image = procfs::own_vdso_image();
    if (image.empty())
      return fail(error("flamebpf has no vDSO of its own to read"));
    auto elf = ElfReader::open(ElfBytes::memory(image), "[vdso]");
    if (!elf)
      return fail(elf.error());
    return table_of(*elf);
  }();
  return built;
}

bool has_rows(const UnwindTable& table)
{
  // One row of the frame pointer (or none) unwinds as no table does.
  return std::any_of(table.rows.begin(), table.rows.end(),
                     [](const fb_unwind_row& row) { return row.kind != FB_UNWIND_FRAME_POINTER; });
}

} // namespace

Result<FileTable> build_file_table(const std::string& process_dir, const procfs::Mapping& mapping)
{
  if (mapping.path == "[vdso]")
    return vdso_table();
  auto mapped = open_mapped_elf(process_dir, mapping, true);
  if (!mapped)
    return fail(mapped.error());
  auto built = table_of(mapped->elf);
  if (!built)
    return built;
  mapped->reads->seal();
  built->reads = std::move(mapped->reads);
  return built;
}

TableLoader::TableLoader(TableMaps& maps, std::string proc_root, FileTableBuilder builder)
    : maps_(maps), proc_root_(std::move(proc_root)), builder_(std::move(builder)),
      rows_(maps.row_capacity())
{
  // Slot 0 stays empty: no mapping points at it, so a zeroed mapping finds no rows.
  for (uint32_t slot = maps.table_capacity(); slot > 1; --slot)
    free_slots_.push_back(slot - 1);
}

void TableLoader::on_process_seen(uint32_t pid, uint32_t image_id)
{
  ImageKey key{pid, image_id};
  auto started = std::chrono::steady_clock::now();
  load_image(key, images_[key]);
  std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - started;
  if (took.count() > 20)
    spdlog::debug("process {}: its unwind tables took {:.0f} ms", pid, took.count());
}

void TableLoader::queue_process(uint32_t pid, uint32_t image_id)
{
  queued_.push_back({pid, image_id});
}

bool TableLoader::load_queued(std::chrono::steady_clock::time_point deadline)
{
  while (!queued_.empty() && std::chrono::steady_clock::now() < deadline) {
    auto [pid, image_id] = queued_.front();
    queued_.pop_front();
    on_process_seen(pid, image_id);
  }
  return !queued_.empty();
}

void TableLoader::on_mapping_missed(uint32_t pid, uint32_t image_id)
{
  auto it = images_.find({pid, image_id});
  if (it == images_.end())
    return;
  Image& image = it->second;
  if (image.misses_to_let_pass > 0) {
    --image.misses_to_let_pass;
    ++counts_.misses_let_pass;
    return;
  }
  ++counts_.maps_rereads;
  auto mappings_before = image.file_mappings;
  auto without_tables_before = image.without_tables;
  load_image(it->first, image);
  bool same =
      image.without_tables == without_tables_before &&
      std::equal(image.file_mappings.begin(), image.file_mappings.end(), mappings_before.begin(),
                 mappings_before.end(), [](const fb_unwind_mapping& a, const fb_unwind_mapping& b) {
                   return a.start == b.start && a.end == b.end;
                 });
  if (!same || image.tables_to_come) {
    image.fruitless_rereads = 0;
    return;
  }
  ++counts_.maps_rereads_fruitless;
  image.fruitless_rereads = std::min(image.fruitless_rereads + 1, 4u);
  image.misses_to_let_pass = std::min((1u << image.fruitless_rereads) - 1, kMaxMissesLetPass);
}

void TableLoader::forget_image(uint32_t pid, uint32_t image_id)
{
  std::erase(queued_, ImageKey{pid, image_id});
  auto it = images_.find({pid, image_id});
  if (it == images_.end())
    return;
  maps_.remove_image({pid, image_id});
  for (uint64_t content_key : it->second.content_keys)
    release_use(content_key);
  for (const auto& [start, code] : it->second.code)
    release(code.placed);
  images_.erase(it);
}

void TableLoader::load_image(const ImageKey& key, Image& image)
{
  std::string process_dir = proc_root_ + "/" + std::to_string(key.first);
  auto text = procfs::read_file(process_dir + "/maps", kMaxMapsBytes);
  if (!text) {
    spdlog::debug("no unwind tables for process {}: {}", key.first, text.error().message);
    return;
  }
  std::vector<fb_unwind_mapping> mappings;
  std::set<uint64_t> content_keys;
  // A process seen for the first time has each table installed as soon as it is built, the
  // program's own (mapped first) before its libraries': building a large library's table (libc's
  // takes tens of milliseconds) would otherwise leave all of its code unwound by frame pointers,
  // which without them gives wrong stacks until the last table is in.
  bool first_load = image.file_mappings.empty() && image.content_keys.empty();
  std::vector<Range> without_tables;
  bool tables_to_come = false;
  auto no_table = [&](const procfs::Mapping& mapping) {
    if (!without_tables.empty() && without_tables.back().end == mapping.start)
      without_tables.back().end = mapping.end;
    else
      without_tables.push_back({mapping.start, mapping.end});
  };
  for (const auto& mapping : procfs::parse_proc_maps(*text)) {
    if (!mapping.executable)
      continue;
    if (!mapping.file_backed() && mapping.path != "[vdso]") {
      no_table(mapping);
      continue;
    }
    auto built_before = counts_.files_built;
    const KnownFile* file = file_for(process_dir, mapping);
    if (!file) {
      // A file that failed or has no rows never will; one that stalls or found no room may.
      FileKey mapped = file_key(mapping);
      auto known = files_.find(mapped);
      if (failed_files_.contains(mapped) || (known != files_.end() && !known->second.has_rows))
        no_table(mapping);
      else
        tables_to_come = true;
      continue;
    }
    auto bias = load_bias(file->segments, mapping);
    auto table = tables_.find(file->content_key);
    if (!bias || table == tables_.end()) {
      no_table(mapping);
      continue;
    }
    // Counted once per image, whatever number of its mappings use the table.
    if (content_keys.insert(file->content_key).second &&
        !image.content_keys.contains(file->content_key))
      reuse(file->content_key, table->second);
    mappings.push_back({mapping.start, mapping.end, *bias + table->second.base_address,
                        table->second.placed.slot, 0});
    if (first_load && counts_.files_built != built_before) {
      image.file_mappings = mappings;
      install(key, image);
    }
  }
  // The uses of the tables the image no longer maps end after the new mappings are in.
  std::set<uint64_t> dropped;
  std::set_difference(image.content_keys.begin(), image.content_keys.end(), content_keys.begin(),
                      content_keys.end(), std::inserter(dropped, dropped.end()));
  image.file_mappings = std::move(mappings);
  image.without_tables = std::move(without_tables);
  image.tables_to_come = tables_to_come;
  image.content_keys = std::move(content_keys);
  install(key, image);
  for (uint64_t content_key : dropped)
    release_use(content_key);
}

TableLoader::FileKey TableLoader::file_key(const procfs::Mapping& mapping)
{
  return mapping.path == "[vdso]"
             ? FileKey{~0ull, 0}
             : FileKey{makedev(mapping.device_major, mapping.device_minor), mapping.inode};
}

const TableLoader::KnownFile* TableLoader::file_for(const std::string& process_dir,
                                                    const procfs::Mapping& mapping)
{
  FileKey key = file_key(mapping);
  if (failed_files_.contains(key))
    return nullptr;
  if (auto known = files_.find(key); known != files_.end()) {
    if (!known->second.has_rows)
      return nullptr;
    if (tables_.contains(known->second.content_key)) {
      ++counts_.files_shared;
      return &known->second;
    }
  }
  auto built = build_guarded(key, process_dir, mapping);
  if (!built)
    return nullptr;
  if (*built && (*built)->copy && !tables_.contains((*built)->content_key)) {
    // The table it is a copy of was freed meanwhile: its rows are read after all.
    auto copies = std::exchange(copy_index_, std::make_shared<CopyIndex>());
    built = build_guarded(key, process_dir, mapping);
    copy_index_ = std::move(copies);
    if (!built)
      return nullptr;
  }
  return keep_file(key, mapping, std::move(*built));
}

std::optional<FileTable> TableLoader::copy_of(const std::string& process_dir,
                                              const procfs::Mapping& mapping,
                                              const CopyIndex& copies)
{
  if (copies.empty() || mapping.path == "[vdso]")
    return std::nullopt;
  auto file = open_mapped_file(process_dir, mapping);
  struct stat status {};
  if (!file || ::fstat(file->get(), &status) != 0)
    return std::nullopt; // the build says why
  auto size = static_cast<uint64_t>(status.st_size);
  auto [first, last] = copies.equal_range(size);
  size_t tried = 0;
  for (auto it = first; it != last && tried++ < kMaxCopiesTried; ++it) {
    const CopyOrigin& origin = *it->second;
    if (!origin.reads->replays_on(file->get(), size))
      continue;
    FileTable copy;
    copy.content_key = origin.content_key;
    copy.segments = origin.segments;
    copy.trouble = origin.trouble;
    copy.reads = origin.reads;
    copy.copy = true;
    return copy;
  }
  return std::nullopt;
}

void TableLoader::index_copies(const FileTable* built)
{
  auto index = std::make_shared<CopyIndex>();
  for (const auto& [size, origin] : *copy_index_)
    if (tables_.contains(origin->content_key))
      index->emplace(size, origin);
  if (built && built->reads && built->reads->usable())
    index->emplace(built->reads->file_size(),
                   std::make_shared<const CopyOrigin>(CopyOrigin{built->reads, built->content_key,
                                                                 built->segments, built->trouble}));
  copy_index_ = std::move(index);
}

std::optional<Result<FileTable>> TableLoader::build_guarded(const FileKey& key,
                                                            const std::string& process_dir,
                                                            const procfs::Mapping& mapping)
{
  if (auto pending = stalled_files_.find(key); pending != stalled_files_.end()) {
    if (pending->second.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
      return std::nullopt;
    auto built = pending->second.get();
    stalled_files_.erase(pending);
    spdlog::info("{}: answers again", mapping.path);
    return built;
  }
  // The work owns copies of what it reads: after a stall it runs on alone.
  auto outcome = stall_guard_.run<Result<FileTable>>(
      [builder = builder_, process_dir, mapping, copies = copy_index_]() -> Result<FileTable> {
        if (auto copy = copy_of(process_dir, mapping, *copies))
          return std::move(*copy);
        return builder(process_dir, mapping);
      });
  if (!outcome) {
    spdlog::debug("{}: no unwind table, too many reads of targets' files are stalled",
                  mapping.path);
    return std::nullopt;
  }
  if (outcome->stalled) {
    ++counts_.files_stalled;
    // The symbolizer says so in its one line about the file; the count is in the loader's.
    spdlog::debug("{}: no answer within {} ms (its file system stalls); its code is unwound by the "
                  "frame pointer until it answers",
                  mapping.path, kStallLimit.count());
    stalled_files_.emplace(key, outcome->result);
    return std::nullopt;
  }
  return outcome->result.get();
}

const TableLoader::KnownFile*
TableLoader::keep_file(const FileKey& key, const procfs::Mapping& mapping, Result<FileTable> built)
{
  if (!built) {
    ++counts_.files_failed;
    if (failed_files_.size() >= kMaxKnownFiles)
      failed_files_.clear(); // tried (and logged) once more, rather than remembered without end
    failed_files_.insert(key);
    spdlog::info("{}: no unwind table ({}); its frames are unwound by the frame pointer",
                 mapping.path, built.error().message);
    return nullptr;
  }
  if (reported_files_.size() >= kMaxKnownFiles)
    reported_files_.clear();
  if (!built->trouble.empty() && reported_files_.insert(key).second) {
    ++counts_.files_malformed;
    spdlog::info("{}: {}; that code is unwound by the frame pointer", mapping.path, built->trouble);
  }
  if (files_.size() >= kMaxKnownFiles) {
    // Files with no rows hold no table whose release would forget them; they are cheap to read
    // again, so they are what is dropped.
    std::erase_if(files_, [](const auto& entry) { return !entry.second.has_rows; });
  }
  KnownFile& known = files_[key];
  known.content_key = built->content_key;
  known.segments = built->segments;
  // A copy's table is held, so has rows: only tables with rows are held.
  known.has_rows = built->copy || has_rows(built->table);
  if (!known.has_rows)
    return nullptr;
  if (tables_.contains(known.content_key)) {
    ++counts_.files_shared; // another file with the same CFI
    if (built->copy)
      ++counts_.files_replayed;
    return &known;
  }
  auto placed = place(built->table, mapping.path);
  if (!placed) {
    files_.erase(key); // tried again when room is made
    return nullptr;
  }
  ++counts_.files_built;
  tables_[known.content_key] = {*placed, built->table.base_address, 0};
  index_copies(&*built);
  return &known;
}

std::optional<TableLoader::Placed> TableLoader::place(const UnwindTable& table,
                                                      const std::string& shown)
{
  auto no_room = [&](const std::string& why) -> std::optional<Placed> {
    ++counts_.files_no_room;
    if (!full_logged_) {
      full_logged_ = true;
      spdlog::warn("{}: {}; this and further code is unwound by frame pointers (raise "
                   "--unwind-memory)",
                   shown, why);
    }
    return std::nullopt;
  };
  if (table.rows.size() > UINT32_MAX)
    return no_room("its table is larger than the row array");
  auto count = static_cast<uint32_t>(table.rows.size());
  // Idle tables make room first.
  if (free_slots_.empty())
    trim_idle(0);
  if (free_slots_.empty())
    return no_room("every unwind table slot is taken");
  auto first = rows_.take(count);
  if (!first && !idle_.empty()) {
    trim_idle(0);
    first = rows_.take(count);
  }
  if (!first)
    return no_room("the unwind table memory is full");
  uint32_t slot = free_slots_.back();
  Placed placed{slot, *first, count};
  if (auto written = maps_.write_rows(*first, table.rows); !written) {
    rows_.give_back(*first, count);
    spdlog::warn("{}: {}", shown, written.error().message);
    return std::nullopt;
  }
  if (auto set = maps_.set_table(slot, {*first, count}); !set) {
    rows_.give_back(*first, count);
    spdlog::warn("{}: {}", shown, set.error().message);
    return std::nullopt;
  }
  free_slots_.pop_back();
  return placed;
}

void TableLoader::release(const Placed& placed)
{
  (void)maps_.set_table(placed.slot, {0, 0});
  rows_.give_back(placed.first_row, placed.row_count);
  free_slots_.push_back(placed.slot);
}

void TableLoader::release_use(uint64_t content_key)
{
  auto table = tables_.find(content_key);
  if (table == tables_.end() || --table->second.users > 0)
    return;
  uint32_t rows = table->second.placed.row_count;
  if (rows > kMaxIdleRows) {
    free_table(content_key);
    return;
  }
  idle_.push_back(content_key);
  idle_rows_ += rows;
  trim_idle(kMaxIdleRows);
}

void TableLoader::reuse(uint64_t content_key, SharedTable& table)
{
  if (table.users++ > 0)
    return;
  if (auto idle = std::find(idle_.begin(), idle_.end(), content_key); idle != idle_.end()) {
    idle_.erase(idle);
    idle_rows_ -= table.placed.row_count;
  }
}

void TableLoader::trim_idle(uint32_t max_rows)
{
  while (idle_rows_ > max_rows && !idle_.empty()) {
    uint64_t content_key = idle_.front();
    idle_.pop_front();
    auto table = tables_.find(content_key);
    if (table == tables_.end())
      continue;
    idle_rows_ -= table->second.placed.row_count;
    free_table(content_key);
  }
}

void TableLoader::free_table(uint64_t content_key)
{
  auto table = tables_.find(content_key);
  if (table == tables_.end())
    return;
  release(table->second.placed);
  tables_.erase(table);
  // What is known of the files behind the table goes with it: containers bring new inodes of the
  // same libraries all the time, and a file mapped again is simply read again.
  std::erase_if(files_, [&](const auto& entry) { return entry.second.content_key == content_key; });
  index_copies(nullptr);
}

void TableLoader::install(const ImageKey& key, const Image& image)
{
  std::vector<fb_unwind_mapping> all = image.file_mappings;
  for (const auto& [start, code] : image.code)
    all.push_back({start, code.end, code.base_address, code.placed.slot, 0});
  auto by_start = [](const auto& a, const auto& b) { return a.start < b.start; };
  std::sort(all.begin(), all.end(), by_start);
  std::vector<fb_unwind_mapping> placed;
  for (const auto& mapping : all) {
    if (placed.size() == FB_MAX_IMAGE_MAPPINGS)
      break; // the rest are unwound by the frame pointer
    // Overlaps cannot be searched: the first one wins.
    if (!placed.empty() && mapping.start < placed.back().end)
      continue;
    placed.push_back(mapping);
  }
  fb_image_key image_key{key.first, key.second};
  if (placed.empty()) {
    // With no table at all, the kernel's frame-pointer walker does as well.
    maps_.remove_image(image_key);
    return;
  }
  // The code without tables fills the places left, around the tables' (a JIT's code table lies
  // inside its anonymous mapping).
  std::vector<fb_unwind_mapping> gaps;
  size_t room = FB_MAX_IMAGE_MAPPINGS - placed.size();
  for (const auto& range : image.without_tables) {
    uint64_t from = range.start;
    auto next = std::upper_bound(placed.begin(), placed.end(),
                                 fb_unwind_mapping{range.start, 0, 0, 0, 0}, by_start);
    if (next != placed.begin() && std::prev(next)->end > from)
      from = std::prev(next)->end;
    while (from < range.end && gaps.size() < room) {
      uint64_t to = next != placed.end() ? std::min<uint64_t>(next->start, range.end) : range.end;
      if (from < to)
        gaps.push_back({from, to, FB_NO_TABLE_BASE, 0, 0});
      if (next == placed.end())
        break;
      from = std::max<uint64_t>(from, next->end);
      ++next;
    }
  }
  placed.insert(placed.end(), gaps.begin(), gaps.end());
  std::sort(placed.begin(), placed.end(), by_start);
  auto mappings = std::make_unique<fb_image_mappings>();
  mappings->count = static_cast<uint32_t>(placed.size());
  std::copy(placed.begin(), placed.end(), mappings->mappings);
  if (auto set = maps_.set_image(image_key, *mappings); !set) {
    spdlog::debug("process {}: {}", key.first, set.error().message);
    return;
  }
  ++counts_.images_installed;
}

Result<> TableLoader::install_code_table(
    uint32_t pid, uint32_t image_id, uint64_t start, uint64_t end, const UnwindTable& table)
{
  if (start >= end || table.rows.empty() || table.base_address > start)
    return fail(error("a code table must cover a nonempty range at or after its base address"));
  ImageKey key{pid, image_id};
  auto placed = place(table, "code of process " + std::to_string(pid));
  if (!placed)
    return fail(error("no room for the code table of process " + std::to_string(pid)));
  Image& image = images_[key];
  std::optional<Placed> old;
  if (auto it = image.code.find(start); it != image.code.end())
    old = it->second.placed;
  image.code[start] = {end, table.base_address, *placed};
  install(key, image);
  if (old)
    release(*old);
  return {};
}

void TableLoader::remove_code_table(uint32_t pid, uint32_t image_id, uint64_t start)
{
  auto it = images_.find({pid, image_id});
  if (it == images_.end())
    return;
  auto code = it->second.code.find(start);
  if (code == it->second.code.end())
    return;
  Placed placed = code->second.placed;
  it->second.code.erase(code);
  install(it->first, it->second);
  release(placed);
}

void TableLoader::measure_memory(std::shared_ptr<MemoryAccount> account)
{
  memory_ = MemoryCharge(std::move(account), MemoryKind::kUnwindTables);
  measure();
}

void TableLoader::measure()
{
  // A node of a tree (three pointers and a colour) or of a hash table (a pointer and the hash).
  constexpr uint64_t kTreeNode = 4 * sizeof(void*);
  constexpr uint64_t kHashNode = 2 * sizeof(void*);
  uint64_t bytes = free_slots_.capacity() * sizeof(uint32_t);
  bytes += rows_.free_runs() * (kTreeNode + 2 * sizeof(uint32_t));
  for (const auto& [key, file] : files_)
    bytes += kTreeNode + sizeof(std::pair<const FileKey, KnownFile>) +
             file.segments.capacity() * sizeof(LoadSegment);
  bytes += (failed_files_.size() + reported_files_.size()) * (kTreeNode + sizeof(FileKey));
  bytes += stalled_files_.size() *
           (kTreeNode + sizeof(std::pair<const FileKey, std::shared_future<Result<FileTable>>>));
  bytes += tables_.bucket_count() * sizeof(void*) +
           tables_.size() * (kHashNode + sizeof(std::pair<const uint64_t, SharedTable>)) +
           idle_.size() * sizeof(uint64_t);
  for (const auto& [key, image] : images_)
    bytes += kTreeNode + sizeof(std::pair<const ImageKey, Image>) +
             image.file_mappings.capacity() * sizeof(fb_unwind_mapping) +
             image.without_tables.capacity() * sizeof(Range) +
             image.content_keys.size() * (kTreeNode + sizeof(uint64_t)) +
             image.code.size() * (kTreeNode + sizeof(std::pair<const uint64_t, CodeTable>));
  bytes += queued_.size() * sizeof(ImageKey);
  for (const auto& [size, origin] : *copy_index_)
    bytes += kHashNode + sizeof(CopyOrigin) + origin->reads->memory_bytes() +
             origin->segments.capacity() * sizeof(LoadSegment) + origin->trouble.capacity();
  (void)memory_.set(bytes); // measured: never refused
}

size_t TableLoader::live_tables() const
{
  size_t live = tables_.size() - idle_.size();
  for (const auto& [key, image] : images_)
    live += image.code.size();
  return live;
}

uint32_t TableLoader::table_users(uint64_t content_key) const
{
  auto it = tables_.find(content_key);
  return it == tables_.end() ? 0 : it->second.users;
}

} // namespace flamebpf::unwind
