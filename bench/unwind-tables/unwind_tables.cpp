// Builds the unwind table of every executable file that a running process maps, once per file
// (as the sampler's tables are shared), and prints what the tables cost: rows, BPF map bytes,
// bytes per MB of CFI, build time and peak RSS. Files named on the command line are added (for
// the largest libraries, which may not be running). Files are opened as flamebpf opens them:
// through /proc/<pid>/map_files, O_PATH, then reopened only if regular.
// Usage: flamebpf-unwind-tables [file...]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <map>
#include <set>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <vector>

#include "common/contained_file.h"
#include "common/elf_reader.h"
#include "common/proc_maps.h"
#include "common/procfs.h"
#include "unwind/cfi_table.h"

using namespace flamebpf;

namespace {

using Clock = std::chrono::steady_clock;

struct Built {
  std::string path;
  uint64_t content_key = 0;
  size_t rows = 0;
  uint64_t cfi_bytes = 0;
  double seconds = 0;
  unwind::CfiCounts counts;
  std::string section;
  // Knowing a copy of the file by what the build read (ReadRecord), as the loader does for
  // another container's copy instead of building its table.
  double copy_seconds = 0;
};

struct Totals {
  size_t processes = 0;
  size_t mappings = 0;
  size_t failures = 0;
  double build_seconds = 0;
  std::map<std::pair<dev_t, ino_t>, std::optional<Built>> files; // by file identity
};

std::optional<Built> build(UniqueFd fd, const std::string& shown, Totals& totals)
{
  struct stat status {};
  if (::fstat(fd.get(), &status) != 0)
    return std::nullopt;
  auto started = Clock::now();
  ReadRecord reads(static_cast<uint64_t>(status.st_size));
  auto elf = ElfReader::open(
      ElfBytes::file(fd.get(), static_cast<uint64_t>(status.st_size), &reads), shown);
  if (!elf) {
    ++totals.failures;
    return std::nullopt;
  }
  auto table = unwind::build_cfi_table(*elf);
  double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  totals.build_seconds += seconds;
  if (!table) {
    ++totals.failures;
    std::fprintf(stderr, "%s\n", table.error().message.c_str());
    return std::nullopt;
  }
  reads.seal();
  auto replay_started = Clock::now();
  if (!reads.replays_on(fd.get(), static_cast<uint64_t>(status.st_size)))
    std::fprintf(stderr, "%s: its reads do not replay on itself\n", shown.c_str());
  double copy_seconds = std::chrono::duration<double>(Clock::now() - replay_started).count();
  return Built{shown,   table->content_key, table->table.rows.size(), table->counts.cfi_bytes,
               seconds, table->counts,      table->section,           copy_seconds};
}

void add_file(UniqueFd fd, const std::string& shown, Totals& totals)
{
  struct stat status {};
  if (!fd.valid() || ::fstat(fd.get(), &status) != 0)
    return;
  auto key = std::make_pair(status.st_dev, status.st_ino);
  if (totals.files.contains(key))
    return;
  totals.files[key] = build(std::move(fd), shown, totals);
}

void walk_process(const std::string& pid, Totals& totals)
{
  std::string process = "/proc/" + pid;
  auto maps = procfs::read_file(process + "/maps", 16 << 20);
  if (!maps)
    return;
  ++totals.processes;
  for (const procfs::Mapping& mapping : procfs::parse_proc_maps(*maps)) {
    if (!mapping.executable || !mapping.file_backed())
      continue;
    ++totals.mappings;
    std::string via_map_files =
        fmt::format("{}/map_files/{:x}-{:x}", process, mapping.start, mapping.end);
    UniqueFd located(::open(via_map_files.c_str(), O_PATH | O_CLOEXEC));
    if (!located.valid())
      continue;
    struct stat status {};
    if (::fstat(located.get(), &status) != 0 ||
        totals.files.contains(std::make_pair(status.st_dev, status.st_ino)))
      continue;
    auto file = reopen_regular(located.get(), via_map_files);
    if (file)
      add_file(std::move(*file), mapping.path, totals);
  }
}

long peak_rss_kib()
{
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

} // namespace

int main(int argc, char** argv)
{
  Totals totals;
  auto started = Clock::now();
  if (DIR* proc = ::opendir("/proc")) {
    while (dirent* entry = ::readdir(proc)) {
      std::string name = entry->d_name;
      if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos &&
          std::to_string(::getpid()) != name)
        walk_process(name, totals);
    }
    ::closedir(proc);
  }
  for (int i = 1; i < argc; ++i) {
    auto file = open_contained("/", argv[i]);
    if (file)
      add_file(std::move(*file), argv[i], totals);
  }
  double wall = std::chrono::duration<double>(Clock::now() - started).count();

  // Tables are shared by content key: count each once.
  std::map<uint64_t, const Built*> tables;
  uint64_t malformed = 0, dropped = 0, fallback_rows = 0;
  size_t without_cfi = 0;
  for (const auto& [key, built] : totals.files) {
    if (!built)
      continue;
    tables.emplace(built->content_key, &*built);
    if (built->section.empty())
      ++without_cfi;
  }
  size_t rows = 0;
  uint64_t cfi_bytes = 0;
  std::vector<const Built*> by_rows;
  for (const auto& [key, built] : tables) {
    rows += built->rows;
    cfi_bytes += built->cfi_bytes;
    malformed += built->counts.fdes_malformed;
    dropped += built->counts.fdes_dropped;
    fallback_rows += built->counts.rows_frame_pointer;
    by_rows.push_back(built);
  }
  std::sort(by_rows.begin(), by_rows.end(),
            [](const Built* a, const Built* b) { return a->rows > b->rows; });
  constexpr double kMiB = 1 << 20;
  size_t row_bytes = sizeof(fb_unwind_row);
  fmt::print("processes                  {}\n", totals.processes);
  fmt::print("executable file mappings   {}\n", totals.mappings);
  fmt::print("distinct files             {} ({} without CFI, {} failed)\n", totals.files.size(),
             without_cfi, totals.failures);
  fmt::print("distinct tables            {} (by content key)\n", tables.size());
  fmt::print("total rows                 {}\n", rows);
  fmt::print("BPF map bytes              {} ({:.1f} MiB at {} bytes a row)\n", rows * row_bytes,
             static_cast<double>(rows * row_bytes) / kMiB, row_bytes);
  fmt::print("CFI bytes read             {} ({:.1f} MiB)\n", cfi_bytes,
             static_cast<double>(cfi_bytes) / kMiB);
  fmt::print("table bytes per MB of CFI  {:.0f}\n",
             cfi_bytes ? static_cast<double>(rows * row_bytes) / (cfi_bytes / 1e6) : 0.0);
  fmt::print("FDEs malformed / dropped   {} / {}; CFI rows left to the frame pointer {}\n",
             malformed, dropped, fallback_rows);
  fmt::print("build time                 {:.3f} s of tables ({:.3f} s wall with /proc)\n",
             totals.build_seconds, wall);
  fmt::print("peak RSS                   {} KiB\n", peak_rss_kib());
  size_t largest = std::min<size_t>(50, by_rows.size());
  size_t largest_rows = 0;
  for (size_t i = 0; i < largest; ++i)
    largest_rows += by_rows[i]->rows;
  fmt::print("synthetic: 500 processes of the {} largest distinct binaries here: {} rows, {:.1f} "
             "MiB of the 64 MiB target ({})\n",
             largest, largest_rows, static_cast<double>(largest_rows * row_bytes) / kMiB,
             largest_rows * row_bytes <= (64u << 20) ? "met" : "NOT met");
  fmt::print("largest tables:\n");
  for (size_t i = 0; i < std::min<size_t>(8, by_rows.size()); ++i)
    fmt::print("  {:>8} rows  {:>9} CFI bytes  {:7.1f} ms  {}\n", by_rows[i]->rows,
               by_rows[i]->cfi_bytes, by_rows[i]->seconds * 1e3, by_rows[i]->path);
  fmt::print("libc and libjvm (and another container's copy, known by what the build read):\n");
  for (const auto& [key, built] : totals.files)
    if (built && (built->path.find("/libc.so") != std::string::npos ||
                  built->path.find("libjvm.so") != std::string::npos))
      fmt::print("  {:>8} rows  {:>9} CFI bytes  {:7.1f} ms  (a copy {:5.2f} ms)  {}\n",
                 built->rows, built->cfi_bytes, built->seconds * 1e3, built->copy_seconds * 1e3,
                 built->path);
  return 0;
}
