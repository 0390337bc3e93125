#include "symbolize/process_table.h"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <utility>

#include "common/contained_file.h"
#include "common/log.h"
#include "common/mapped_file.h"
#include "common/procfs.h"
#include "symbolize/debuginfod.h"

namespace flamebpf::symbolize {

const MappedCode* ProcessImage::find(uint64_t address) const
{
  auto it =
      std::upper_bound(code.begin(), code.end(), address,
                       [](uint64_t value, const MappedCode& m) { return value < m.mapping.start; });
  if (it == code.begin())
    return nullptr;
  --it;
  return address < it->mapping.end ? &*it : nullptr;
}

std::shared_ptr<const ElfSymbols> ElfCache::get(uint32_t pid,
                                                const procfs::Mapping& mapping,
                                                const std::shared_ptr<MemoryShare>& share)
{
  FileKey key{makedev(mapping.device_major, mapping.device_minor), mapping.inode};
  ++uses_;
  if (auto it = files_.find(key); it != files_.end()) {
    it->second.last_use = uses_;
    return it->second.held->symbols;
  }
  if (failed_.contains(key) || over_share_.contains(key))
    return nullptr;

  std::string process = proc_root_ + "/" + std::to_string(pid);
  std::string shown = process + "/root" + mapping.path;
  if (auto pending = stalled_.find(key); pending != stalled_.end()) {
    if (pending->second.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
      return nullptr;
    auto opened = pending->second.get();
    stalled_.erase(pending);
    spdlog::info("{}: answers again", shown);
    return keep(key, opened, shown, share);
  }
  // The work owns copies of what it reads: after a stall it runs on alone.
  auto outcome = stall_guard_.run<OpenedSymbols>(
      [process, mapping, shown, fetcher = fetcher_, copies = copy_index_]() -> OpenedSymbols {
        auto file = open_mapped_file(process, mapping);
        if (!file)
          return fail(file.error());
        if (auto copy = copy_of(file->get(), *copies))
          return copy;
        // Debug files are looked for inside the process's root, then on the host: a container's
        // files are often the host distribution's own (by build ID, checked, so nothing of the
        // host's is taken for a file it is not).
        std::string root = process + "/root";
        std::vector<DebugRoot> debug_roots;
        struct stat root_status {};
        struct stat host_status {};
        bool own_root = ::stat(root.c_str(), &root_status) == 0 && ::stat("/", &host_status) == 0 &&
                        root_status.st_dev == host_status.st_dev &&
                        root_status.st_ino == host_status.st_ino;
        if (auto root_fd = open_directory(root))
          debug_roots.push_back({std::move(*root_fd), kResolveInRoot, root, true});
        if (!own_root) {
          if (auto host_fd = open_directory("/"))
            debug_roots.push_back({std::move(*host_fd), kResolveInRoot, "", false});
        }
        auto symbols =
            ElfSymbols::open(std::move(*file), mapping.path, debug_roots, shown, fetcher.get());
        if (!symbols)
          return fail(symbols.error());
        return std::shared_ptr<const ElfSymbols>(std::move(*symbols));
      });
  if (!outcome) {
    spdlog::debug("{}: not read, too many reads of targets' files are stalled", shown);
    return nullptr;
  }
  if (outcome->stalled) {
    spdlog::warn("{}: no answer within {} ms (its file system stalls); its frames stay unnamed "
                 "until it answers",
                 shown, kStallLimit.count());
    stalled_.emplace(key, outcome->result);
    return nullptr;
  }
  return keep(key, outcome->result.get(), shown, share);
}

std::shared_ptr<const ElfSymbols> ElfCache::copy_of(int fd, const CopyIndex& copies)
{
  struct stat status {};
  if (::fstat(fd, &status) != 0)
    return nullptr;
  auto size = static_cast<uint64_t>(status.st_size);
  auto [first, last] = copies.equal_range(size);
  size_t tried = 0;
  for (auto it = first; it != last && tried < kMaxCopiesTried; ++it) {
    auto symbols = it->second.lock();
    if (!symbols)
      continue;
    ++tried;
    if (symbols->reads()->replays_on(fd, size))
      return symbols;
  }
  return nullptr;
}

void ElfCache::index_copies_of(const std::shared_ptr<const ElfSymbols>& symbols)
{
  auto index = std::make_shared<CopyIndex>();
  for (const auto& [size, weak] : *copy_index_) {
    auto held = weak.lock();
    if (held && !held->names_changed())
      index->emplace(size, weak);
  }
  if (symbols)
    index->emplace(symbols->reads()->file_size(), symbols);
  copy_index_ = std::move(index);
}

std::shared_ptr<const ElfSymbols> ElfCache::keep(const FileKey& key,
                                                 const OpenedSymbols& opened,
                                                 const std::string& shown,
                                                 const std::shared_ptr<MemoryShare>& share)
{
  if (!opened) {
    spdlog::debug("{}", opened.error().message);
    failed_[key] = 1;
    return nullptr;
  }
  const std::shared_ptr<const ElfSymbols>& symbols = *opened;
  // A copy of a table found changed while the copy was read: the file is read anew next time.
  if (symbols->names_changed())
    return nullptr;
  if (!symbols->problems().empty())
    spdlog::warn("{}: {}", shown, fmt::join(symbols->problems(), "; "));
  uint64_t content_hash = symbols->content_hash();
  if (auto alike = held_alike(*symbols, content_hash)) {
    if (alike->symbols == symbols)
      ++copies_replayed_;
    files_.emplace(key, Cached{alike, uses_});
    return alike->symbols;
  }
  size_t bytes = symbols->memory_bytes();
  if (held_bytes_ + bytes > max_held_bytes_)
    evict_unused(held_bytes_ + bytes - max_held_bytes_);
  if (held_bytes_ + bytes > max_held_bytes_) {
    if (!full_reported_)
      spdlog::warn("the symbols of ELF files in use take {} MiB; {} and further files are left "
                   "unnamed",
                   held_bytes_ >> 20, shown);
    full_reported_ = true;
    failed_[key] = 1;
    return nullptr;
  }
  MemoryCharge charge(share, MemoryKind::kSymbols);
  if (!charge.grow(bytes)) {
    // Files no process maps give back what they held, to this share or the account.
    evict_unused(bytes);
    if (!charge.grow(bytes)) {
      spdlog::debug("{}: left unnamed: its target's share of memory is taken", shown);
      over_share_.insert(key);
      return nullptr;
    }
  }
  held_bytes_ += bytes;
  auto held = std::make_shared<Held>(
      Held{symbols, bytes, bytes, std::move(charge), MemoryCharge(share, MemoryKind::kInlines)});
  held_by_content_[content_hash] = held;
  if (symbols->reads())
    index_copies_of(symbols);
  files_.emplace(key, Cached{std::move(held), uses_});
  queue_inlines(key, symbols);
  return symbols;
}

size_t ElfCache::tables() const
{
  std::set<const Held*> held;
  for (const auto& [key, cached] : files_)
    held.insert(cached.held.get());
  return held.size();
}

std::shared_ptr<ElfCache::Held> ElfCache::held_alike(const ElfSymbols& symbols,
                                                     uint64_t content_hash) const
{
  auto it = held_by_content_.find(content_hash);
  if (it == held_by_content_.end())
    return nullptr;
  auto held = it->second.lock();
  if (!held || !held->symbols->names_alike(symbols))
    return nullptr;
  return held;
}

void ElfCache::queue_inlines(const FileKey& key, const std::shared_ptr<const ElfSymbols>& symbols)
{
  auto source = symbols->take_inline_source();
  if (!source)
    return;
  // flamebpf's own inlined functions are nobody's question, and its DWARF is the largest a first
  // run meets: indexing it made most of a newcomer's samples on an idle host, and its budget's
  // warning the one line the newcomer could not act on.
  static const std::optional<FileKey> own = []() -> std::optional<FileKey> {
    struct stat status {};
    if (::stat("/proc/self/exe", &status) != 0)
      return std::nullopt;
    return FileKey{status.st_dev, status.st_ino};
  }();
  if (own && key == *own)
    return;
  const std::string& build_id = symbols->build_id();
  if (!build_id.empty()) {
    if (auto built = inline_indexes_.find(build_id); built != inline_indexes_.end()) {
      if (auto index = built->second.lock()) {
        use_inlines(key, index);
        return;
      }
      inline_indexes_.erase(built);
    }
    if (auto job = inline_job_of_build_id_.find(build_id); job != inline_job_of_build_id_.end()) {
      inline_jobs_[job->second].files.emplace_back(key, symbols);
      symbols->set_inlines_pending(true);
      return;
    }
  }
  if (!indexer_)
    indexer_ = std::make_unique<InlineIndexer>();
  uint64_t job = next_inline_job_++;
  std::string shown = source->shown;
  if (!indexer_->queue(job, std::move(*source))) {
    spdlog::debug("{}: inlined functions not read: {} files wait for theirs already", shown,
                  InlineIndexer::kMaxQueued);
    return;
  }
  inline_jobs_[job] = InlineJob{build_id, {{key, symbols}}};
  symbols->set_inlines_pending(true);
  if (!build_id.empty())
    inline_job_of_build_id_[build_id] = job;
}

void ElfCache::install_inlines()
{
  if (!indexer_)
    return;
  for (auto& built : indexer_->take_built()) {
    auto job = inline_jobs_.extract(built.key);
    if (job.empty())
      continue;
    const InlineJob& done = job.mapped();
    if (!done.build_id.empty())
      inline_job_of_build_id_.erase(done.build_id);
    if (!built.problems.empty())
      spdlog::warn("inlined functions: {}", fmt::join(built.problems, "; ")); // each names the file
    if (!built.index) {
      spdlog::debug("{}: no inlined functions named: {}", built.shown, built.index.error().message);
      for (const auto& [key, file] : done.files)
        if (auto symbols = file.lock())
          symbols->set_inlines_pending(false);
      continue;
    }
    const auto& index = *built.index;
    spdlog::debug("{}: {} ranges of inlined functions in {} KiB, read in {} ms", built.shown,
                  index->ranges(), index->memory_bytes() >> 10, built.took.count());
    // Files forgotten meanwhile are indexed again if they are read again.
    for (const auto& [key, file] : done.files) {
      // Held here, so that making room cannot evict it; a file evicted meanwhile is skipped, and
      // so is another file that came to have its key.
      auto symbols = file.lock();
      if (auto cached = files_.find(key);
          cached != files_.end() && cached->second.held->symbols == symbols)
        use_inlines(key, index);
      if (symbols)
        symbols->set_inlines_pending(false); // given, or left out for room: nothing more comes
    }
    if (!done.build_id.empty())
      inline_indexes_[done.build_id] = index;
  }
  std::erase_if(inline_indexes_, [](const auto& entry) { return entry.second.expired(); });
}

void ElfCache::use_inlines(const FileKey& key, const std::shared_ptr<const InlineIndex>& index)
{
  auto it = files_.find(key);
  if (it == files_.end())
    return;
  size_t bytes = index->memory_bytes();
  if (held_bytes_ + bytes > max_held_bytes_)
    evict_unused(held_bytes_ + bytes - max_held_bytes_);
  if (held_bytes_ + bytes > max_held_bytes_) {
    if (!full_reported_)
      spdlog::warn("the symbols of ELF files in use take {} MiB; inlined functions of further "
                   "files are left unnamed",
                   held_bytes_ >> 20);
    full_reported_ = true;
    return;
  }
  // The caller holds the file's symbols, so evicting made room without it.
  it = files_.find(key);
  Held& held = *it->second.held;
  if (!held.inline_charge.grow(bytes))
    return; // its target's share is taken: said once by the share
  held.symbols->use_inlines(index);
  held.bytes += bytes;
  held_bytes_ += bytes;
}

std::vector<std::pair<uint64_t, ElfCache::FileKey>> ElfCache::unused_files() const
{
  std::vector<std::pair<uint64_t, FileKey>> unused;
  for (const auto& [key, cached] : files_) {
    if (cached.held->symbols.use_count() == 1)
      unused.emplace_back(cached.last_use, key);
  }
  return unused;
}

void ElfCache::evict_unused(size_t bytes)
{
  auto unused = unused_files();
  std::sort(unused.begin(), unused.end());
  size_t freed = 0;
  for (const auto& [last_use, key] : unused) {
    if (freed >= bytes)
      break;
    freed += erase(key);
  }
}

size_t ElfCache::erase(const FileKey& key)
{
  auto it = files_.find(key);
  if (it == files_.end())
    return 0;
  std::shared_ptr<Held> held = std::move(it->second.held);
  files_.erase(it);
  if (held.use_count() > 1)
    return 0;
  held_bytes_ -= held->bytes;
  return held->bytes;
}

void ElfCache::charge_names_read(bool forget_unused_names)
{
  std::set<Held*> charged;
  for (auto& [key, cached] : files_) {
    Held& held = *cached.held;
    if (!charged.insert(&held).second)
      continue;
    if (forget_unused_names)
      held.symbols->forget_unused_names();
    size_t now = held.symbols->memory_bytes();
    // A share that refuses leaves them uncharged, not unread: they are held already, and few.
    if (now > held.symbol_bytes && held.charge.grow(now - held.symbol_bytes)) {
      held_bytes_ += now - held.symbol_bytes;
      held.bytes += now - held.symbol_bytes;
      held.symbol_bytes = now;
    } else if (now < held.symbol_bytes) {
      size_t freed = held.symbol_bytes - now;
      held.charge.shrink(freed);
      held_bytes_ -= freed;
      held.bytes -= freed;
      held.symbol_bytes = now;
    }
  }
}

void ElfCache::trim()
{
  auto now = std::chrono::steady_clock::now();
  bool names_period_over = now - names_forgotten_ >= names_period_;
  if (names_period_over)
    names_forgotten_ = now;
  charge_names_read(names_period_over);
  auto unused = unused_files();
  // Newest first; copies of a kept table cost nothing more.
  std::sort(unused.begin(), unused.end(), std::greater<>());
  std::set<const Held*> kept;
  size_t kept_bytes = 0;
  for (const auto& [last_use, key] : unused) {
    const Held* held = files_.at(key).held.get();
    if (kept.contains(held))
      continue;
    if (kept.size() < kUnusedKept && kept_bytes + held->bytes <= unused_kept_bytes_) {
      kept.insert(held);
      kept_bytes += held->bytes;
    } else {
      erase(key);
    }
  }
  if (held_bytes_ < max_held_bytes_ / 2)
    full_reported_ = false;
  // A failure is remembered so that a file is not retried each sample; after many, all are
  // forgotten at once and retried when met again.
  if (failed_.size() > kFailuresKept)
    failed_.clear();
  if (changed_.size() > kFailuresKept)
    changed_.clear();
  over_share_.clear();
  std::erase_if(held_by_content_, [](const auto& entry) { return entry.second.expired(); });
}

ProcessTable::ProcessTable(std::string proc_root, std::shared_ptr<MemoryAccount> account)
    : proc_root_(std::move(proc_root)),
      account_(account ? std::move(account)
                       : MemoryAccount::create(MemoryAccount::kDefaultTotalBytes)),
      elf_cache_(proc_root_)
{
}

ProcessSnapshot ProcessTable::read_snapshot(uint32_t pid) const
{
  ProcessSnapshot snapshot;
  if (auto maps = procfs::read_file(proc_root_ + "/" + std::to_string(pid) + "/maps"))
    snapshot.maps = std::move(*maps);
  else
    return snapshot; // gone: nothing else of it is left to read
  snapshot.comm = procfs::read_comm(pid, proc_root_).value_or("");
  snapshot.ns_pid = procfs::read_ns_pid(pid, proc_root_).value_or(0);
  snapshot.cgroup = procfs::read_cgroup2_path(pid, proc_root_).value_or("");
  return snapshot;
}

void ProcessTable::keep_snapshot(const ImageKey& key)
{
  if (snapshot_bytes_ >= kMaxSnapshotBytes || snapshots_.contains(key))
    return;
  ProcessSnapshot snapshot = read_snapshot(key.pid);
  snapshot_bytes_ += snapshot.bytes();
  snapshots_.emplace(key, std::move(snapshot));
}

void ProcessTable::capture(const ImageKey& key, const std::string& comm, uint64_t cgroup_id)
{
  std::optional<ProcessSnapshot> early;
  if (auto kept = snapshots_.extract(key); !kept.empty()) {
    snapshot_bytes_ -= std::min(snapshot_bytes_, kept.mapped().bytes());
    early = std::move(kept.mapped());
  }
  uint32_t pid = key.pid;
  auto [found, first] = processes_.try_emplace(key);
  ProcessImage& image = found->second;
  if (first)
    image.first_capture_generation = generation_;
  if (cgroup_id != 0)
    image.cgroup_id = cgroup_id;
  if (!comm.empty())
    image.comm = comm;
  image.capture_generation = generation_;

  image.captured_mid_exec = false;
  image.read_again = false;
  // What /proc says now, else (the process is gone) what it said at the first sample.
  ProcessSnapshot live = read_snapshot(pid);
  const ProcessSnapshot* seen = live.maps ? &live : early && early->maps ? &*early : nullptr;
  if (!seen) {
    // Gone already: whatever an earlier capture found stays.
    if (image.comm.empty())
      image.comm = "[unknown]";
    return;
  }
  const std::optional<std::string>& text = seen->maps;
  // The process's own name wins over the one the first sample carried: that is a thread's, and a
  // sample taken inside execve after the new memory image but before the new name carries the old
  // program's.
  if (!seen->comm.empty())
    image.comm = seen->comm;
  if (image.ns_pid == 0)
    image.ns_pid = seen->ns_pid;
  if (image.cgroup.empty())
    image.cgroup = seen->cgroup;
  if (!image.share)
    image.share =
        account_->share(profile::target_of(targets_, 0, pid, {image.cgroup, image.cgroup_id}));
  image.maps_read = true;
  auto mappings = procfs::parse_proc_maps(*text);
  // Before the code mappings are moved into the image: the runtimes see every one.
  for (const auto& runtime : runtimes_)
    runtime->captured(*this, key, image, mappings);
  std::vector<MappedCode> code;
  for (auto& mapping : mappings) {
    if (!mapping.executable)
      continue;
    MappedCode entry{std::move(mapping), nullptr};
    if (entry.mapping.file_backed())
      entry.symbols = elf_cache_.get(pid, entry.mapping, image.share);
    code.push_back(std::move(entry));
  }
  std::sort(code.begin(), code.end(), [](const MappedCode& a, const MappedCode& b) {
    return a.mapping.start < b.mapping.start;
  });
  // A program always has code mapped (its own or the dynamic loader's) once execve has loaded it.
  image.captured_mid_exec = code.empty();
  image.code = std::move(code);
}

const ElfSymbols* ProcessTable::symbols_of(const ImageKey& key, const MappedCode& code)
{
  if (code.symbols || !code.mapping.file_backed())
    return code.symbols.get();
  // Remembered failures and files still being read cost a lookup, nothing more.
  auto it = processes_.find(key);
  if (it == processes_.end())
    return nullptr;
  auto late = elf_cache_.get(key.pid, code.mapping, it->second.share);
  if (!late)
    return nullptr;
  for (auto& mapped : it->second.code) {
    if (&mapped == &code)
      mapped.symbols = late;
  }
  return code.symbols.get();
}

bool ProcessImage::perf_map_usable()
{
  if (perf_map_stalled &&
      perf_map_stalled->wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    spdlog::info("{}: answers again", perf_map->file().path());
    perf_map_stalled.reset();
  }
  return perf_map && !perf_map_stalled;
}

void ProcessTable::refresh_perf_map(ProcessImage& image)
{
  // A quiet map is told on this thread: no hand-off to the stall guard's worker.
  if (image.perf_map_usable() && !image.perf_map->file().quiet_at_a_glance())
    read_perf_map_file(image, [](PerfMapReader& reader) { reader.refresh(); });
}

bool ProcessTable::read_perf_map_file(ProcessImage& image,
                                      const std::function<void(PerfMapReader&)>& work)
{
  // The work holds the reader: should it stall, it may finish long after this image is gone.
  auto outcome = stall_guard_.run<bool>([reader = image.perf_map, work] {
    work(*reader);
    return true;
  });
  if (!outcome) {
    spdlog::debug("{}: not read, too many reads of targets' files are stalled",
                  image.perf_map->file().path());
    return false;
  }
  if (outcome->stalled) {
    image.perf_map_stalled = outcome->result;
    spdlog::warn("{}: no answer within {} ms (its file system stalls); its JIT frames stay "
                 "unnamed until it answers",
                 image.perf_map->file().path(), kStallLimit.count());
    return false;
  }
  return true;
}

const ProcessImage& ProcessTable::get(const ImageKey& key)
{
  auto it = processes_.find(key);
  if (it == processes_.end()) {
    capture(key, "");
    it = processes_.find(key);
  }
  it->second.used_generation = generation_;
  return it->second;
}

const ProcessImage& ProcessTable::refresh(const ImageKey& key)
{
  const ProcessImage& image = get(key);
  if (image.capture_generation == generation_ && !image.captured_mid_exec) {
    processes_.at(key).read_again |= image.first_capture_generation == generation_;
    return image;
  }
  capture(key, "");
  return processes_.at(key);
}

const PerfMapTable* ProcessTable::perf_map(const ImageKey& key)
{
  get(key);
  ProcessImage& image = processes_.at(key);
  if (!open_perf_map(key, image))
    return nullptr;
  if (image.perf_map_generation != generation_) {
    image.perf_map_generation = generation_;
    refresh_perf_map(image);
  }
  return image.perf_map_usable() ? &image.perf_map->table() : nullptr;
}

std::optional<PerfMapTable::Entry> ProcessTable::perf_map_entry(const ImageKey& key,
                                                                uint64_t address)
{
  const PerfMapTable* map = perf_map(key);
  auto entry = map ? map->find(address) : std::nullopt;
  if (!entry || !entry->line)
    return entry;
  // Its name is read from the map the first time a frame needs it, as the map is read.
  ProcessImage& image = processes_.at(key);
  if (!read_perf_map_file(image, [address](PerfMapReader& reader) { reader.read_name(address); }))
    return std::nullopt;
  entry = image.perf_map->table().find(address);
  return entry && !entry->line ? entry : std::nullopt;
}

bool ProcessTable::open_perf_map(const ImageKey& key, ProcessImage& image)
{
  if (image.perf_map)
    return true;
  if (image.ns_pid == 0)
    return false;
  image.perf_map = std::make_shared<PerfMapReader>(key.pid, image.ns_pid, proc_root_, image.share);
  return true;
}

std::vector<PerfMapStatus> ProcessTable::perf_maps() const
{
  std::vector<PerfMapStatus> maps;
  for (const auto& [key, image] : processes_) {
    if (!image.perf_map || image.perf_map_stalled)
      continue;
    if (auto modified = image.perf_map->file().modified())
      maps.push_back(
          {key.pid, image.perf_map->file().path(), *modified, image.perf_map->table().size()});
  }
  return maps;
}

void ProcessTable::read_perf_map(const ImageKey& key)
{
  auto it = processes_.find(key);
  if (it != processes_.end() && open_perf_map(key, it->second))
    refresh_perf_map(it->second);
}

void ProcessTable::reread_perf_map(uint32_t pid)
{
  for (auto& [key, image] : processes_) {
    if (key.pid == pid && image.perf_map)
      image.perf_map->reread();
  }
}

const ProcessImage* ProcessTable::find(const ImageKey& key) const
{
  auto it = processes_.find(key);
  return it == processes_.end() ? nullptr : &it->second;
}

void ElfCache::forget_build_id(const std::string& build_id)
{
  std::vector<FileKey> forgotten;
  for (const auto& [key, cached] : files_) {
    if (cached.held->symbols->build_id() == build_id)
      forgotten.push_back(key);
  }
  for (const auto& key : forgotten)
    erase(key);
}

bool ElfCache::forget_changed()
{
  std::vector<FileKey> forgotten;
  for (const auto& [key, cached] : files_) {
    const ElfSymbols& symbols = *cached.held->symbols;
    if (!symbols.names_changed())
      continue;
    forgotten.push_back(key);
    // Once per file: one that keeps changing is read again each interval, quietly.
    if (changed_.insert(key).second)
      spdlog::warn("{}: a name in the file is not the one read before (the file changed); its "
                   "symbols are read again",
                   symbols.shown());
  }
  for (const auto& key : forgotten)
    erase(key);
  if (!forgotten.empty())
    index_copies_of(nullptr); // a changed table is no copy's
  return !forgotten.empty();
}

void ProcessTable::fetch_debug_files_with(std::shared_ptr<DebugFetcher> fetcher)
{
  fetcher_ = fetcher;
  elf_cache_.fetch_debug_files_with(std::move(fetcher));
}

void ProcessTable::take_arrivals()
{
  if (fetcher_) {
    // The files a debug file arrived for are read again on their next use.
    for (const auto& build_id : fetcher_->take_arrived()) {
      elf_cache_.forget_build_id(build_id);
      for (auto& [key, image] : processes_) {
        for (auto& mapped : image.code) {
          if (mapped.symbols && mapped.symbols->build_id() == build_id)
            mapped.symbols.reset();
        }
      }
    }
  }
  // A file changed since its table was read is read again on its next use, by each process.
  if (elf_cache_.forget_changed()) {
    for (auto& [key, image] : processes_) {
      for (auto& mapped : image.code) {
        if (mapped.symbols && mapped.symbols->names_changed())
          mapped.symbols.reset();
      }
    }
  }
  elf_cache_.install_inlines();
}

std::vector<ImageKey> ProcessTable::end_generation()
{
  take_arrivals();
  // The newest capture of each pid is its current image; older ones were replaced by exec.
  std::unordered_map<uint32_t, uint64_t> newest_capture;
  for (const auto& [key, image] : processes_) {
    auto& newest = newest_capture[key.pid];
    newest = std::max(newest, image.capture_generation);
  }
  std::vector<ImageKey> gone;
  std::vector<ImageKey> recaptured;
  for (auto it = processes_.begin(); it != processes_.end();) {
    auto& [key, image] = *it;
    // A process that exited after the buffers were switched still has samples in the kernel:
    // it is forgotten at the generation's end after the one that found it gone.
    bool exited = false;
    if (::kill(static_cast<pid_t>(key.pid), 0) != 0 && errno == ESRCH) {
      exited = image.found_exited;
      image.found_exited = true;
    }
    bool replaced =
        image.capture_generation < newest_capture[key.pid] && image.used_generation < generation_;
    if (exited || replaced) {
      for (const auto& runtime : runtimes_)
        runtime->forget(key, exited);
      gone.push_back(key);
      it = processes_.erase(it);
    } else {
      if (image.perf_map_usable())
        image.perf_map->begin_interval();
      bool newest = image.capture_generation == newest_capture[key.pid];
      if (newest && recaptured.size() < kMaxRecaptures &&
          (image.read_again ||
           std::any_of(runtimes_.begin(), runtimes_.end(),
                       [&](const auto& runtime) { return runtime->wants_recapture(key); })))
        recaptured.push_back(key);
      ++it;
    }
  }
  for (const auto& key : recaptured)
    capture(key, "");
  elf_cache_.trim();
  ++generation_;
  return gone;
}

} // namespace flamebpf::symbolize
