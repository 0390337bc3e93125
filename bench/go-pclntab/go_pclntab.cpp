// What a Go binary's own function table (.gopclntab) costs flamebpf, for each file named: finding
// and checking the table; its functions' names as the symbol reader keeps them (bytes held, time);
// the unwind rows its stack-pointer tables add to the file's table (rows, map bytes, time); its
// inline trees as frames read them (held before any lookup, and after a lookup in every function);
// and the growth of resident memory through all of it.
// Usage: flamebpf-go-pclntab FILE...
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fcntl.h>
#include <fmt/format.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "common/elf_reader.h"
#include "common/unique_fd.h"
#include "runtimes/go/pclntab.h"
#include "symbolize/elf_symbols.h"
#include "symbolize/go_inlines.h"
#include "unwind/cfi_table.h"
#include "unwind/go_table.h"

using namespace flamebpf;

namespace {

uint64_t rss_bytes()
{
  FILE* statm = std::fopen("/proc/self/statm", "r");
  unsigned long pages = 0, resident = 0;
  if (statm) {
    if (std::fscanf(statm, "%lu %lu", &pages, &resident) != 2)
      resident = 0;
    std::fclose(statm);
  }
  return static_cast<uint64_t>(resident) * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

double seconds_since(std::chrono::steady_clock::time_point start)
{
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double mib(uint64_t bytes)
{
  return static_cast<double>(bytes) / (1 << 20);
}

} // namespace

int main(int argc, char** argv)
{
  for (int i = 1; i < argc; ++i) {
    std::string path = argv[i];
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat status {};
    if (!fd.valid() || ::fstat(fd.get(), &status) != 0) {
      fmt::print("{}: cannot open\n", path);
      continue;
    }
    uint64_t rss_before = rss_bytes();
    auto elf =
        ElfReader::open(ElfBytes::file(fd.get(), static_cast<uint64_t>(status.st_size)), path);
    if (!elf) {
      fmt::print("{}: {}\n", path, elf.error().message);
      continue;
    }
    auto started = std::chrono::steady_clock::now();
    auto table = go::Pclntab::open(*elf);
    double open_seconds = seconds_since(started);
    if (!table || !*table) {
      fmt::print("{}: no Go pclntab\n", path);
      continue;
    }
    const ElfSection* section = elf->section_named(".gopclntab");
    fmt::print("{}: {:.1f} MB, {} functions, {}, pclntab {:.1f} MB; table found and checked in "
               "{:.3f} s\n",
               path, static_cast<double>(status.st_size) / 1e6, (*table)->size(),
               (*table)->layout_name(), section ? static_cast<double>(section->size) / 1e6 : 0.0,
               open_seconds);

    started = std::chrono::steady_clock::now();
    UniqueFd symbols_fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    auto symbols = symbolize::ElfSymbols::open(std::move(symbols_fd), path, {}, path);
    double names_seconds = seconds_since(started);
    if (symbols)
      fmt::print("  names: {} functions from {}, {:.2f} MiB held, read in {:.3f} s\n",
                 (*symbols)->symbol_count(), (*symbols)->symbols_from(),
                 mib((*symbols)->memory_bytes()), names_seconds);

    started = std::chrono::steady_clock::now();
    auto cfi = unwind::build_cfi_table(*elf);
    unwind::GoRows rows = unwind::go_rows(**table, *elf);
    std::optional<unwind::UnwindTable> merged;
    if (cfi)
      merged = unwind::merge_rows(cfi->table, rows, unwind::kMaxCfiRows);
    double rows_seconds = seconds_since(started);
    size_t cfi_rows = cfi ? cfi->table.rows.size() : 0;
    size_t all_rows = merged ? merged->rows.size() : 0;
    fmt::print("  unwind rows: {} from CFI, {} with Go's ({:.2f} MiB of map at {} bytes a row; "
               "{} of {} functions framed, {} stack switches, {} malformed), built in {:.3f} s\n",
               cfi_rows, all_rows, mib(all_rows * sizeof(fb_unwind_row)), sizeof(fb_unwind_row),
               rows.framed, rows.functions, rows.stack_switches, rows.malformed, rows_seconds);

    // Inline trees are read a function at a time, as frames need them: the table held meanwhile,
    // then one lookup in every function, the most a profile can ask.
    started = std::chrono::steady_clock::now();
    std::vector<std::string> problems;
    auto tree = symbolize::GoInlineTree::open(fd.get(), path, problems);
    double tree_seconds = seconds_since(started);
    if (tree) {
      size_t held = tree->memory_bytes();
      size_t inlined = 0;
      started = std::chrono::steady_clock::now();
      for (size_t f = 0; f < (*table)->size(); ++f) {
        go::GoFunction function = (*table)->function(f);
        inlined += !tree->at(function.entry + (function.end - function.entry) / 2, nullptr).empty();
      }
      double every_seconds = seconds_since(started);
      fmt::print("  inline trees: {:.2f} MiB held before a lookup (opened in {:.3f} s); one lookup "
                 "in each of the {} functions read them all in {:.3f} s ({:.1f} us a function, "
                 "{} inside an inlined call), {:.2f} MiB held after\n",
                 mib(held), tree_seconds, (*table)->size(), every_seconds,
                 1e6 * every_seconds / static_cast<double>(std::max<size_t>(1, (*table)->size())),
                 inlined, mib(tree->memory_bytes()));
    } else {
      fmt::print("  inline trees: none{}\n", problems.empty() ? "" : ": " + problems.front());
    }
    fmt::print("  resident memory grew {:.1f} MiB\n",
               mib(rss_bytes() > rss_before ? rss_bytes() - rss_before : 0));
  }
  return 0;
}
