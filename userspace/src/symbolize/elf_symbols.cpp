#include "symbolize/elf_symbols.h"

#include <algorithm>
#include <cerrno>
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "common/elf_reader.h"
#include "common/hashing.h"
#include "common/log.h"
#include "common/memory_account.h"
#include "runtimes/go/pclntab.h"
#include "symbolize/debuginfod.h"
#include "symbolize/name_cut.h"
#include "symbolize/xz.h"

namespace flamebpf::symbolize {
namespace {

std::string mib(uint64_t bytes)
{
  return std::to_string(bytes >> 20) + " MiB";
}

// A keyed hash of a name's first kMaxSymbolNameBytes bytes: the name read later must have it.
uint32_t name_check(std::string_view name)
{
  SipHash hash(content_hash_key());
  hash.update(name.substr(0, kMaxSymbolNameBytes));
  return static_cast<uint32_t>(hash.finish());
}

// A name as stored (raw: up to its NUL, at most kMaxSymbolNameBytes + 1 bytes of it), cut to the
// budget with kTruncated if longer; cut says whether it was.
std::string kept_name(std::string_view raw, bool& cut)
{
  cut = raw.size() > kMaxSymbolNameBytes;
  return cut ? cut_name(raw, kMaxSymbolNameBytes) : std::string(raw);
}

// The name starting at offset of names (up to its NUL, at most kMaxSymbolNameBytes + 1 bytes).
std::string_view raw_name_at(std::string_view names, uint64_t offset)
{
  if (offset >= names.size())
    return {};
  std::string_view name = names.substr(offset, kMaxSymbolNameBytes + 1);
  return name.substr(0, name.find('\0'));
}

// The descriptor of reader's file, for names to be read from it later; null for an image in
// memory, or if no descriptor is left.
std::shared_ptr<ElfSymbols::Table::NameFile>
name_file_of(const ElfReader& reader, uint64_t at, uint64_t size)
{
  if (reader.bytes().fd() < 0)
    return nullptr;
  UniqueFd own(::fcntl(reader.bytes().fd(), F_DUPFD_CLOEXEC, 0));
  if (!own.valid())
    return nullptr;
  return std::make_shared<ElfSymbols::Table::NameFile>(
      ElfSymbols::Table::NameFile{std::move(own), at, size});
}

// Adds the function symbols of table (a symbol table section of reader) to out, their addresses
// moved by bias (the debug file's layout to the ELF file's). Their names stay in reader's file if
// it is one (out must have no names yet then), unless copy_names. What a budget cuts is said in
// problems.
Result<> add_symbols(const ElfReader& reader,
                     const ElfSection& table,
                     uint64_t bias,
                     bool copy_names,
                     ElfSymbols::Table& out,
                     std::vector<std::string>& problems)
{
  const auto& sections = reader.sections();
  if (table.link >= sections.size() || sections[table.link].type != SHT_STRTAB)
    return fail(error("cannot read symbols of " + reader.shown() + ": no string table"));
  const ElfSection& string_table = sections[table.link];
  auto strings = reader.read_section(string_table, kMaxStringTableBytes);
  if (!strings)
    return fail(strings.error());
  if (strings->cut)
    problems.push_back("string table of " + table.name + " larger than " +
                       mib(kMaxStringTableBytes) + ", names past it ignored");
  std::string_view names = strings->bytes;
  if (!copy_names && out.names.empty() && out.symbols.empty()) {
    out.name_file = name_file_of(reader, string_table.offset, names.size());
  }
  bool in_file = out.name_file != nullptr;
  // The function symbols first, in the table's order; their names are resolved after, in the
  // string table's order, each checked (and, held in memory, copied) once however many symbols
  // share it. Two arrays, not a node per name: a large library names hundreds of thousands, and
  // small blocks freed after loading stay in the heap.
  struct Found {
    uint64_t address;
    uint64_t size;
    uint32_t string;   // st_name
    uint32_t name = 0; // where the name is, once resolved
    uint32_t check = 0;
    bool valid = false;
  };
  std::vector<Found> found;
  uint64_t cut_before = out.names_cut;
  auto cut = reader.read_symbols(table, kMaxSymbolTableBytes, [&](const ElfSymbolEntry& entry) {
    if (entry.section == SHN_UNDEF || entry.section == SHN_ABS || entry.value == 0)
      return;
    if (entry.type != STT_FUNC && entry.type != STT_GNU_IFUNC && entry.type != STT_NOTYPE)
      return;
    if (entry.name >= names.size())
      return;
    found.push_back({entry.value + bias, entry.size, entry.name});
  });
  std::vector<uint32_t> by_string(found.size());
  for (uint32_t i = 0; i < by_string.size(); ++i)
    by_string[i] = i;
  std::ranges::sort(by_string, [&](uint32_t a, uint32_t b) {
    return std::pair(found[a].string, a) < std::pair(found[b].string, b);
  });
  // A name ends before the table's last NUL or not at all: one search, not one per name.
  size_t last_end = names.rfind('\0');
  const Found* previous = nullptr;
  for (uint32_t index : by_string) {
    Found& symbol = found[index];
    if (previous && previous->string == symbol.string) {
      symbol.name = previous->name;
      symbol.check = previous->check;
      symbol.valid = previous->valid;
      previous = &symbol;
      continue;
    }
    previous = &symbol;
    if (names[symbol.string] == '\0' || last_end == std::string_view::npos ||
        symbol.string > last_end)
      continue; // empty, or its end is past the budget
    std::string_view raw = raw_name_at(names, symbol.string);
    out.names_cut += raw.size() > kMaxSymbolNameBytes;
    symbol.name = symbol.string;
    if (!in_file) {
      symbol.name = static_cast<uint32_t>(out.names.size());
      out.names.append(raw);
      out.names.push_back('\0');
    }
    symbol.check = name_check(raw);
    symbol.valid = true;
  }
  by_string = {};
  out.symbols.reserve(out.symbols.size() + found.size());
  for (const Found& symbol : found) {
    if (symbol.valid)
      out.symbols.push_back({symbol.address, symbol.size, symbol.name, symbol.check});
  }
  if (!cut)
    return fail(cut.error());
  if (*cut)
    problems.push_back(table.name + " larger than " + mib(kMaxSymbolTableBytes) +
                       ", symbols past it ignored");
  if (out.names_cut > cut_before)
    problems.push_back(std::to_string(out.names_cut - cut_before) + " names of " + table.name +
                       " longer than " + std::to_string(kMaxSymbolNameBytes) + " bytes cut");
  return {};
}

// The symbols of reader's first table of type (SHT_SYMTAB, SHT_DYNSYM), or an empty table; names
// held in memory if copy_names, else left in reader's file where it is one.
ElfSymbols::Table read_table(const ElfReader& reader,
                             uint32_t type,
                             uint64_t bias,
                             std::vector<std::string>& problems,
                             bool copy_names = false)
{
  ElfSymbols::Table table;
  const ElfSection* section = reader.section_of_type(type);
  if (section && section->type != SHT_NOBITS) {
    if (auto added = add_symbols(reader, *section, bias, copy_names, table, problems); !added) {
      problems.push_back(added.error().message);
      return {};
    }
  }
  return table;
}

const ElfSegment* first_load(const ElfReader& reader)
{
  for (const auto& segment : reader.segments()) {
    if (segment.type == PT_LOAD)
      return &segment;
  }
  return nullptr;
}

// What to add to a debug file's addresses to make them the ELF file's: nothing unless the file
// was moved after the debug file was split off (prelink).
uint64_t bias_between(const ElfReader& file, const ElfReader& debug)
{
  const ElfSegment* ours = first_load(file);
  const ElfSegment* theirs = first_load(debug);
  return ours && theirs ? ours->vaddr - theirs->vaddr : 0;
}

// The file fd, for its DWARF (section .debug_info of reader, its ELF) to be read later, if it has
// any. A descriptor of its own: the one open() took is closed on return.
std::optional<InlineSource>
inline_source(int fd, const ElfReader& reader, uint64_t bias, const std::string& shown)
{
  const ElfSection* info = reader.section_named(".debug_info");
  if (!info || info->type == SHT_NOBITS || info->size == 0)
    return std::nullopt;
  UniqueFd own(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!own.valid())
    return std::nullopt;
  return InlineSource{std::move(own), bias, shown};
}

// The functions that a Go binary's pclntab names, which it keeps even when stripped; nullopt if
// reader is no Go binary. Their names stay in the pclntab's name table.
std::optional<ElfSymbols::Table> go_table(const ElfReader& reader,
                                          std::vector<std::string>& problems)
{
  auto table = go::Pclntab::open(reader);
  if (!table) {
    problems.push_back(table.error().message);
    return std::nullopt;
  }
  if (!*table)
    return std::nullopt;
  go::Pclntab& pclntab = **table;
  ElfSymbols::Table out;
  auto [names_at, names_size] = pclntab.name_table();
  out.name_file = name_file_of(reader, names_at, names_size);
  out.symbols.reserve(pclntab.size());
  for (size_t i = 0; i < pclntab.size(); ++i) {
    go::GoFunction function = pclntab.function(i);
    auto name = pclntab.function_name(i);
    if (!name || name->text.empty() || function.end <= function.entry || name->offset > UINT32_MAX)
      continue;
    uint32_t at = static_cast<uint32_t>(name->offset);
    if (!out.name_file) {
      at = static_cast<uint32_t>(out.names.size());
      out.names.append(name->text);
      out.names.push_back('\0');
    }
    out.symbols.push_back(
        {function.entry, function.end - function.entry, at, name_check(name->text)});
  }
  if (pclntab.malformed() > 0)
    problems.push_back(std::to_string(pclntab.malformed()) + " malformed function records in " +
                       reader.shown() + "'s pclntab, their code unnamed");
  return out;
}

// The .symtab of the debug file of reader's file, if one is found; its path in found_at, and
// where its DWARF is in dwarf.
std::optional<ElfSymbols::Table> debug_file_table(const ElfReader& reader,
                                                  const struct stat& status,
                                                  const std::string& path,
                                                  const std::string& build_id,
                                                  const std::vector<DebugRoot>& roots,
                                                  DebugFetcher* fetcher,
                                                  const std::string& shown,
                                                  std::string& found_at,
                                                  std::optional<InlineSource>& dwarf,
                                                  std::vector<std::string>& problems)
{
  DebugQuery query{path, build_id, std::nullopt, status.st_dev, status.st_ino};
  if (const ElfSection* link = reader.section_named(".gnu_debuglink")) {
    auto content = reader.read_section(*link, kMaxDebugLinkBytes);
    if (content && !content->cut)
      query.link = parse_debug_link(content->bytes);
    if (!query.link)
      problems.push_back("malformed .gnu_debuglink ignored");
  }
  if (query.build_id.empty() && !query.link)
    return std::nullopt;
  auto found = find_debug_file(roots, query, problems);
  if (!found && fetcher && !build_id.empty()) {
    // Fetched (now, or in an earlier run) into flamebpf's cache, and checked there to carry the
    // file's build ID; if not yet, it is on its way.
    if (auto fetched = fetcher->find(build_id, shown))
      found = DebugFile{std::move(*fetched), "debuginfod:" + hex(build_id),
                        "debuginfod's file for " + shown};
  }
  if (!found)
    return std::nullopt;
  struct stat debug_status {};
  if (::fstat(found->fd.get(), &debug_status) != 0)
    return std::nullopt;
  auto debug = ElfReader::open(
      ElfBytes::file(found->fd.get(), static_cast<uint64_t>(debug_status.st_size)), found->shown);
  if (!debug) {
    problems.push_back(debug.error().message);
    return std::nullopt;
  }
  found_at = found->path;
  uint64_t bias = bias_between(reader, *debug);
  dwarf = inline_source(found->fd.get(), *debug, bias, found->shown);
  return read_table(*debug, SHT_SYMTAB, bias, problems);
}

// The .symtab of reader's MiniDebugInfo (.gnu_debugdata), if it has one.
std::optional<ElfSymbols::Table> mini_debug_info_table(const ElfReader& reader,
                                                       std::vector<std::string>& problems)
{
  const ElfSection* section = reader.section_named(".gnu_debugdata");
  if (!section)
    return std::nullopt;
  auto compressed = reader.read_section(*section, kMaxDebugDataBytes);
  if (!compressed) {
    problems.push_back(compressed.error().message);
    return std::nullopt;
  }
  if (compressed->cut) {
    problems.push_back(".gnu_debugdata larger than " + mib(kMaxDebugDataBytes) + ", ignored");
    return std::nullopt;
  }
  auto image = xz_decompress(compressed->bytes, kMaxMiniDebugInfoBytes, kMaxXzDecoderBytes);
  if (!image) {
    problems.push_back(".gnu_debugdata ignored: " + image.error().message);
    return std::nullopt;
  }
  auto mini = ElfReader::open(ElfBytes::memory(*image), reader.shown() + " .gnu_debugdata");
  if (!mini) {
    problems.push_back(mini.error().message);
    return std::nullopt;
  }
  return read_table(*mini, SHT_SYMTAB, bias_between(reader, *mini), problems);
}

// first, then second's symbols (names moved after first's); both hold their names in memory.
ElfSymbols::Table joined(ElfSymbols::Table first, const ElfSymbols::Table& second)
{
  auto base = static_cast<uint32_t>(first.names.size());
  first.names += second.names;
  for (auto symbol : second.symbols) {
    symbol.name += base;
    first.symbols.push_back(symbol);
  }
  first.names_cut += second.names_cut;
  return first;
}

} // namespace

ElfSymbols::~ElfSymbols() = default;

Result<std::unique_ptr<ElfSymbols>> ElfSymbols::open(UniqueFd fd,
                                                     const std::string& path,
                                                     const std::vector<DebugRoot>& debug_roots,
                                                     const std::string& shown,
                                                     DebugFetcher* fetcher)
{
  struct stat status {};
  if (::fstat(fd.get(), &status) != 0)
    return fail(system_error(errno, "cannot stat " + shown));
  auto reads = std::make_shared<ReadRecord>(static_cast<uint64_t>(status.st_size));
  auto reader = ElfReader::open(
      ElfBytes::file(fd.get(), static_cast<uint64_t>(status.st_size), reads.get()), shown);
  if (!reader)
    return fail(reader.error());
  auto symbols = of_image(*reader);
  std::string build_id = reader->build_id();
  auto& problems = symbols->problems_;

  Table best;
  const ElfSection* symtab = reader->section_of_type(SHT_SYMTAB);
  if (symtab && symtab->type != SHT_NOBITS && symtab->size > 0) {
    // A file with its own .symtab is not stripped: no debug file can name more.
    best = read_table(*reader, SHT_SYMTAB, 0, problems);
    symbols->symbols_from_ = ".symtab";
    // What follows reads other files, for inlined functions only, which copies need not agree on.
    reads->seal();
    symbols->inline_source_ = inline_source(fd.get(), *reader, 0, shown);
    if (!symbols->inline_source_) {
      // Its DWARF split off into a debug file (strip --strip-debug, a -dbg package): the inlined
      // functions come from there. Only from files at hand: a file that names its functions is
      // not worth a fetch.
      std::string debug_path;
      debug_file_table(*reader, status, path, build_id, debug_roots, nullptr, shown, debug_path,
                       symbols->inline_source_, problems);
    }
  } else {
    reads->drop();
    // The richest table wins. .dynsym is moved into it, not copied: its names take megabytes
    // in a large library, and files are read while others are held.
    Table dynamic = read_table(*reader, SHT_DYNSYM, 0, problems);
    std::optional<Table> richer; // than .dynsym alone
    auto best_size = [&] { return richer ? richer->symbols.size() : dynamic.symbols.size(); };
    symbols->symbols_from_ = ".dynsym";
    std::string debug_path;
    auto debug = debug_file_table(*reader, status, path, build_id, debug_roots, fetcher, shown,
                                  debug_path, symbols->inline_source_, problems);
    if (debug && debug->symbols.size() > best_size()) {
      richer = std::move(*debug);
      symbols->symbols_from_ = debug_path;
    }
    debug.reset();
    // MiniDebugInfo holds only what .dynsym lacks (the copy is of the few files that have it).
    if (auto mini = mini_debug_info_table(*reader, problems)) {
      // Joined in memory: the two tables' names are not in one file. What .dynsym's read cut
      // was said when it was read the first time.
      std::vector<std::string> said;
      Table with_dynamic = joined(read_table(*reader, SHT_DYNSYM, 0, said, true), *mini);
      if (with_dynamic.symbols.size() > best_size()) {
        richer = std::move(with_dynamic);
        symbols->symbols_from_ = ".gnu_debugdata";
      }
    }
    if (auto go = go_table(*reader, problems); go && go->symbols.size() > best_size()) {
      richer = std::move(*go);
      symbols->symbols_from_ = ".gopclntab";
    }
    best = richer ? std::move(*richer) : std::move(dynamic);
  }
  symbols->shown_ = shown;
  // A Go binary without DWARF (stripped, or linked with -w) still has its inline tree.
  bool go_binary = reader->section_named(".gopclntab") != nullptr ||
                   reader->section_named(".data.rel.ro.gopclntab") != nullptr ||
                   reader->section_named(".go.buildinfo") != nullptr ||
                   symbols->symbols_from_ == ".gopclntab";
  if (!symbols->inline_source_ && go_binary) {
    symbols->go_inlines_ = GoInlineTree::open(fd.get(), shown, problems);
    reads->drop(); // the tree is read as frames need it, from this file
  }
  if (reads->usable())
    symbols->reads_ = std::move(reads);

  symbols->keep(std::move(best));
  return symbols;
}

Result<std::unique_ptr<ElfSymbols>> ElfSymbols::read_image(std::string_view image,
                                                           const std::string& shown)
{
  auto reader = ElfReader::open(ElfBytes::memory(image), shown);
  if (!reader)
    return fail(reader.error());
  auto symbols = of_image(*reader);
  symbols->symbols_from_ = ".dynsym";
  symbols->shown_ = shown;
  symbols->keep(read_table(*reader, SHT_DYNSYM, 0, symbols->problems_));
  return symbols;
}

std::unique_ptr<ElfSymbols> ElfSymbols::of_image(const ElfReader& reader)
{
  std::unique_ptr<ElfSymbols> symbols(new ElfSymbols());
  std::optional<uint64_t> lowest;
  for (const auto& segment : reader.segments()) {
    if (segment.type != PT_LOAD)
      continue;
    symbols->segments_.push_back({segment.offset, segment.file_size, segment.vaddr});
    lowest = std::min(lowest.value_or(segment.vaddr), segment.vaddr);
  }
  symbols->base_address_ = lowest.value_or(0);
  symbols->build_id_ = hex(reader.build_id());
  return symbols;
}

void ElfSymbols::keep(Table table)
{
  // By address; among aliases at one address, sized symbols last, so lookups meet them first.
  std::stable_sort(table.symbols.begin(), table.symbols.end(),
                   [](const Table::Entry& a, const Table::Entry& b) {
                     if (a.address != b.address)
                       return a.address < b.address;
                     return (a.size != 0) < (b.size != 0);
                   });
  // Held in 32 bits from the lowest load segment: code further on, or before it, is in no
  // segment of a file that a process maps.
  uint64_t outside = 0;
  symbols_.reserve(table.symbols.size());
  for (const auto& entry : table.symbols) {
    if (entry.address < base_address_ || entry.address - base_address_ > UINT32_MAX) {
      ++outside;
      continue;
    }
    symbols_.push_back({static_cast<uint32_t>(entry.address - base_address_),
                        static_cast<uint32_t>(std::min<uint64_t>(entry.size, UINT32_MAX)),
                        entry.name, entry.check});
  }
  if (outside > 0)
    problems_.push_back(std::to_string(outside) +
                        " symbols outside the 4 GiB from the first load segment ignored");
  symbols_.shrink_to_fit();
  table.names.shrink_to_fit();
  names_ = std::move(table.names);
  name_file_ = std::move(table.name_file);
  names_cut_ = table.names_cut;
}

size_t ElfSymbols::memory_bytes() const
{
  size_t bytes =
      sizeof *this + symbols_.capacity() * sizeof(Symbol) + names_.capacity() +
      segments_.capacity() * sizeof(Segment) + (name_file_ ? sizeof(Table::NameFile) : 0) +
      (go_inlines_ ? go_inlines_->memory_bytes() : 0) + (reads_ ? reads_->memory_bytes() : 0);
  return bytes + demangled_bytes_;
}

size_t ElfSymbols::cached_name_bytes(const Demangled& name)
{
  // A node of the map (its link, key and value, in a 64-byte block) and its bucket.
  constexpr size_t kNodeBytes = 64 + sizeof(void*);
  return kNodeBytes + heap_bytes(name.text);
}

void ElfSymbols::forget_unused_names() const
{
  bool forgot = false;
  for (auto it = demangled_.begin(); it != demangled_.end();) {
    CachedName& cached = it->second;
    if (cached.used || cached.name.cut) {
      cached.used = false;
      ++it;
      continue;
    }
    demangled_bytes_ -= cached_name_bytes(cached.name);
    it = demangled_.erase(it);
    forgot = true;
  }
  // Erasing keeps the buckets a burst of names made; their bytes were given back with the names.
  if (forgot)
    demangled_.rehash(0);
}

bool ElfSymbols::names_alike(const ElfSymbols& other) const
{
  auto same_segment = [](const Segment& a, const Segment& b) {
    return a.offset == b.offset && a.file_size == b.file_size && a.vaddr == b.vaddr;
  };
  auto same_symbol = [](const Symbol& a, const Symbol& b) {
    return a.address == b.address && a.size == b.size && a.name == b.name && a.check == b.check;
  };
  // Names in a file are known by their checks, keyed so that a target cannot choose them.
  bool same_name_file = (name_file_ == nullptr) == (other.name_file_ == nullptr) &&
                        (!name_file_ || name_file_->size == other.name_file_->size);
  return build_id_ == other.build_id_ && symbols_from_ == other.symbols_from_ &&
         names_ == other.names_ && same_name_file && base_address_ == other.base_address_ &&
         std::ranges::equal(segments_, other.segments_, same_segment) &&
         std::ranges::equal(symbols_, other.symbols_, same_symbol);
}

uint64_t ElfSymbols::content_hash() const
{
  SipHash hash(content_hash_key());
  hash.update(build_id_);
  hash.update(symbols_from_);
  hash.update(names_);
  hash.update(name_file_ ? name_file_->size + 1 : 0);
  hash.update(base_address_);
  for (const auto& segment : segments_) {
    hash.update(segment.offset);
    hash.update(segment.file_size);
    hash.update(segment.vaddr);
  }
  for (const auto& symbol : symbols_) {
    hash.update(uint64_t{symbol.address} << 32 | symbol.size);
    hash.update(uint64_t{symbol.name} << 32 | symbol.check);
  }
  return hash.finish();
}

std::optional<uint64_t> ElfSymbols::file_offset_to_vaddr(uint64_t file_offset) const
{
  for (const auto& segment : segments_) {
    if (file_offset >= segment.offset && file_offset - segment.offset < segment.file_size)
      return file_offset - segment.offset + segment.vaddr;
  }
  return std::nullopt;
}

const ElfSymbols::Symbol* ElfSymbols::find_symbol(uint64_t address) const
{
  if (address < base_address_ || address - base_address_ > UINT32_MAX)
    return nullptr;
  auto at = static_cast<uint32_t>(address - base_address_);
  auto after = std::upper_bound(symbols_.begin(), symbols_.end(), at,
                                [](uint32_t value, const Symbol& s) { return value < s.address; });
  if (after == symbols_.begin())
    return nullptr;
  const Symbol& nearest = *std::prev(after);
  if (nearest.size == 0 || at - nearest.address < nearest.size)
    return &nearest;
  // Past the nearest symbol's end: a larger symbol starting a little earlier may enclose it.
  auto first = after - std::min<ptrdiff_t>(after - symbols_.begin(), 16);
  for (auto it = std::prev(after); it != first;) {
    --it;
    if (it->size != 0 && at - it->address < it->size)
      return &*it;
  }
  return nullptr;
}

std::optional<std::string> ElfSymbols::stored_name(const Symbol& symbol, StallGuard* guard) const
{
  if (!name_file_)
    return std::string(raw_name_at(names_, symbol.name));
  // The read owns the descriptor it reads: after a stall it may end after this table is gone.
  std::function<std::optional<std::string>()> read = [file = name_file_, at = symbol.name] {
    std::string name; // empty if the file no longer holds it (it shrank)
    if (at < file->size) {
      size_t length =
          static_cast<size_t>(std::min<uint64_t>(kMaxSymbolNameBytes + 1, file->size - at));
      auto bytes =
          ElfBytes::file(file->fd.get(), file->at + file->size).read(file->at + at, length);
      if (bytes)
        name = bytes->substr(0, bytes->find('\0'));
    }
    return std::optional<std::string>(std::move(name));
  };
  auto name = name_reads_.run(guard, std::move(read), [&](std::chrono::milliseconds limit) {
    spdlog::warn("{}: a read of a name got no answer within {} ms (its file system stalls); its "
                 "frames stay unnamed until it answers",
                 shown_, limit.count());
  });
  if (!name)
    return std::nullopt; // not read now: refused, or stalled
  if (name->empty() || name_check(*name) != symbol.check) {
    names_changed_ = true;
    return std::nullopt;
  }
  return name;
}

std::optional<ElfSymbols::SymbolMatch> ElfSymbols::match_file_offset(uint64_t file_offset,
                                                                     StallGuard* guard) const
{
  auto address = file_offset_to_vaddr(file_offset);
  if (!address)
    return std::nullopt;
  const Symbol* symbol = find_symbol(*address);
  if (!symbol)
    return std::nullopt;
  auto it = demangled_.find(symbol->name);
  if (it == demangled_.end()) {
    auto raw = stored_name(*symbol, guard);
    if (!raw)
      return std::nullopt;
    bool cut = false;
    std::string name = kept_name(*raw, cut);
    // A name cut when read is not demangled: the mangled name is incomplete.
    Demangled made = cut ? Demangled{std::move(name), true} : demangle_bounded(name);
    demangled_cut_ += made.cut && !cut;
    demangled_bytes_ += cached_name_bytes(made);
    it = demangled_.emplace(symbol->name, CachedName{std::move(made)}).first;
  }
  it->second.used = true;
  const Demangled& found = it->second.name;
  SymbolMatch match{found.text, *address - base_address_ - symbol->address, found.cut, {}};
  if (inlines_)
    match.inlined = inlines_->at(*address);
  else if (go_inlines_)
    match.inlined = go_inlines_->at(*address, guard);
  return match;
}

std::optional<std::string> ElfSymbols::symbolize_file_offset(uint64_t file_offset) const
{
  auto match = match_file_offset(file_offset);
  if (!match)
    return std::nullopt;
  return std::move(match->name);
}

} // namespace flamebpf::symbolize
