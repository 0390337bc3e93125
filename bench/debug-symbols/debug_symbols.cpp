// What opening debug files costs flamebpf: for each ELF file named, its symbols as flamebpf reads
// them (its own .symtab, else its debug file found on this host by build ID or .gnu_debuglink,
// else MiniDebugInfo), with the bytes the symbols hold, the growth of resident memory while they
// are held, and the time to read them; then its inline index as flamebpf's background thread
// builds it from the same file's DWARF, with the time, the bytes the index holds and the peak of
// resident memory while it is built; then the same per 100 MB of debug file.
// Usage: flamebpf-debug-symbols FILE...
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fcntl.h>
#include <fmt/format.h>
#include <malloc.h>
#include <memory>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "common/contained_file.h"
#include "common/elf_reader.h"
#include "symbolize/dwarf_inlines.h"
#include "symbolize/elf_symbols.h"

using namespace flamebpf;

namespace {

// Resident memory now, in bytes.
uint64_t rss_bytes()
{
  FILE* statm = std::fopen("/proc/self/statm", "r");
  unsigned long pages = 0;
  unsigned long resident = 0;
  if (statm) {
    if (std::fscanf(statm, "%lu %lu", &pages, &resident) != 2)
      resident = 0;
    std::fclose(statm);
  }
  return static_cast<uint64_t>(resident) * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

// The peak of resident memory since the last reset_peak_rss(), in bytes.
uint64_t peak_rss_bytes()
{
  FILE* status = std::fopen("/proc/self/status", "r");
  uint64_t peak = 0;
  char line[256];
  while (status && std::fgets(line, sizeof line, status)) {
    unsigned long kib = 0;
    if (std::sscanf(line, "VmHWM: %lu kB", &kib) == 1)
      peak = static_cast<uint64_t>(kib) << 10;
  }
  if (status)
    std::fclose(status);
  return peak;
}

void reset_peak_rss()
{
  FILE* clear = std::fopen("/proc/self/clear_refs", "w");
  if (clear) {
    std::fputs("5", clear);
    std::fclose(clear);
  }
}

struct IndexCost {
  double ms = 0;
  uint64_t held = 0;
  uint64_t peak_growth = 0;
  size_t ranges = 0;
  std::string note;
};

// Builds the inline index from the DWARF that symbols found, as flamebpf's indexer does.
IndexCost index_cost(const symbolize::ElfSymbols& symbols)
{
  IndexCost cost;
  auto source = symbols.take_inline_source();
  if (!source) {
    cost.note = "no DWARF";
    return cost;
  }
  struct stat status {};
  ::fstat(source->fd.get(), &status);
  auto reader = ElfReader::open(
      ElfBytes::file(source->fd.get(), static_cast<uint64_t>(status.st_size)), source->shown);
  if (!reader) {
    cost.note = reader.error().message;
    return cost;
  }
  ::malloc_trim(0);
  uint64_t before = rss_bytes();
  reset_peak_rss();
  std::vector<std::string> problems;
  auto started = std::chrono::steady_clock::now();
  auto index = symbolize::InlineIndex::build(*reader, source->bias, problems);
  cost.ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  uint64_t peak = peak_rss_bytes();
  cost.peak_growth = peak > before ? peak - before : 0;
  if (!index) {
    cost.note = index.error().message;
    return cost;
  }
  cost.held = (*index)->memory_bytes();
  cost.ranges = (*index)->ranges();
  for (const auto& problem : problems)
    cost.note += (cost.note.empty() ? "" : "; ") + problem;
  symbols.use_inlines(std::shared_ptr<const symbolize::InlineIndex>(std::move(*index)));
  return cost;
}

} // namespace

int main(int argc, char** argv)
{
  std::vector<std::unique_ptr<symbolize::ElfSymbols>> held;
  uint64_t file_bytes = 0;
  uint64_t growth = 0;
  uint64_t index_bytes = 0;
  uint64_t index_peak = 0;
  std::vector<std::string> index_lines;
  // "copy ms": knowing another container's copy of the file by what reading it read
  // (ElfSymbols::reads), as ElfCache does; "-" where the table depends on more than the file.
  fmt::print("{:<60} {:>9} {:>8} {:>10} {:>10} {:>8} {:>8}  {}\n", "file", "MB", "symbols",
             "held KiB", "RSS+ KiB", "ms", "copy ms", "symbols from");
  for (int i = 1; i < argc; ++i) {
    std::string path = argv[i];
    std::vector<symbolize::DebugRoot> roots;
    if (auto host = open_directory("/"))
      roots.push_back({std::move(*host), kResolveInRoot, "", true});
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat status {};
    if (!fd.valid() || ::fstat(fd.get(), &status) != 0) {
      fmt::print("{}: cannot open\n", path);
      continue;
    }
    ::malloc_trim(0);
    uint64_t before = rss_bytes();
    auto started = std::chrono::steady_clock::now();
    auto symbols = symbolize::ElfSymbols::open(std::move(fd), path, roots, path);
    std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - started;
    if (!symbols) {
      fmt::print("{}: {}\n", path, symbols.error().message);
      continue;
    }
    uint64_t after = rss_bytes();
    // The file whose symbols were read: this one, or its debug file.
    std::string from = (*symbols)->symbols_from();
    struct stat read_status = status;
    if (from.starts_with("/"))
      ::stat(from.c_str(), &read_status);
    file_bytes += static_cast<uint64_t>(read_status.st_size);
    growth += after > before ? after - before : 0;
    std::string copy_ms = "-";
    if (auto reads = (*symbols)->reads()) {
      UniqueFd again(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
      auto replay_started = std::chrono::steady_clock::now();
      bool replayed = reads->replays_on(again.get(), static_cast<uint64_t>(status.st_size));
      std::chrono::duration<double, std::milli> replay =
          std::chrono::steady_clock::now() - replay_started;
      copy_ms = replayed ? fmt::format("{:.2f}", replay.count()) : "failed";
    }
    fmt::print("{:<60} {:>9.1f} {:>8} {:>10} {:>10} {:>8.1f} {:>8}  {}\n", path,
               static_cast<double>(read_status.st_size) / 1e6, (*symbols)->symbol_count(),
               (*symbols)->memory_bytes() >> 10, (after > before ? after - before : 0) >> 10,
               took.count(), copy_ms, from);
    IndexCost cost = index_cost(**symbols);
    index_bytes += cost.held;
    index_peak = std::max(index_peak, cost.peak_growth);
    index_lines.push_back(fmt::format("{:<60} {:>9} {:>10} {:>10} {:>8.1f}  {}", path, cost.ranges,
                                      cost.held >> 10, cost.peak_growth >> 10, cost.ms, cost.note));
    held.push_back(std::move(*symbols));
  }
  fmt::print("\ninline index, built from the same file's DWARF:\n{:<60} {:>9} {:>10} {:>10} {:>8}  "
             "{}\n",
             "file", "ranges", "held KiB", "peak+ KiB", "ms", "problems");
  for (const auto& line : index_lines)
    fmt::print("{}\n", line);
  uint64_t held_bytes = 0;
  for (const auto& symbols : held)
    held_bytes += symbols->memory_bytes();
  if (file_bytes > 0)
    fmt::print("per 100 MB of files read: {:.1f} MiB of symbols held, {:.1f} MiB more RSS\n",
               static_cast<double>(held_bytes) / static_cast<double>(file_bytes) * 1e8 / (1 << 20),
               static_cast<double>(growth) / static_cast<double>(file_bytes) * 1e8 / (1 << 20));
  if (file_bytes > 0)
    fmt::print("inline indexes: {:.1f} MiB held per 100 MB of files read; {:.1f} MiB the largest "
               "peak of resident memory while one was built\n",
               static_cast<double>(index_bytes) / static_cast<double>(file_bytes) * 1e8 / (1 << 20),
               static_cast<double>(index_peak) / (1 << 20));
  return 0;
}
