// An ELF file's symbols as ElfSymbols reads them, with its debug file where flamebpf finds one: in
// a debug root by build ID or by .gnu_debuglink, or in the debuginfod cache (whose file is checked
// for the build ID before it is used), and its MiniDebugInfo (.gnu_debugdata, xz). Whatever the
// bytes: symbols come from a debug file only if its build ID (or for a link, its CRC) is the
// file's, every name found is within its budget and marked when cut, memory stays bounded, and no
// descriptor is left open.
// Input: one byte of flags, then the ELF image, then optionally kSeparator and a debug file image,
// written where the flags say: bit 0 at /usr/lib/debug/.build-id/xx/rest.debug in a debug root,
// bit 1 at /bin/<link name> beside the file (/bin/fuzzed), bit 2 in the debuginfod cache. With
// bit 3, the bytes after the flags are instead one xz stream, decompressed as MiniDebugInfo is.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <elf.h>
#include <fcntl.h>
#include <filesystem>
#include <spdlog/spdlog.h>
#include <string>
#include <string_view>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>
#include <zlib.h>

#include "common/contained_file.h"
#include "common/elf_reader.h"
#include "common/unique_fd.h"
#include "symbolize/debug_files.h"
#include "symbolize/debuginfod.h"
#include "symbolize/elf_symbols.h"
#include "symbolize/name_cut.h"
#include "symbolize/xz.h"

using namespace flamebpf;
using namespace flamebpf::symbolize;

namespace {

constexpr std::string_view kSeparator = "\xfe\xed\xfa\xce";
constexpr std::string_view kFilePath = "/bin/fuzzed";
// The symbols of a 64 KB input, MiniDebugInfo decompressed to its budget included, hold far less.
constexpr size_t kMaxMemoryBytes = 256 << 20;

enum Flags : uint8_t {
  kByBuildId = 1,
  kByLink = 2,
  kInCache = 4,
  kXzOnly = 8,
};

// A scratch directory of this process: the debug root and the debuginfod cache live in it.
struct Scratch {
  std::string base;
  std::string root;  // a debug root, searched as the file's own
  std::string cache; // the debuginfod cache
  int first_free_fd = -1;
};

void remove_scratch();

Scratch& scratch()
{
  // Never destroyed: remove_scratch, run at exit, reads it.
  static Scratch& once = *new Scratch([] {
    char pattern[] = "/tmp/flamebpf-fuzz-elf-symbols.XXXXXX";
    if (!::mkdtemp(pattern))
      std::abort();
    std::string base = pattern;
    Scratch made{base, base + "/root", base + "/cache", -1};
    if (::mkdir(made.root.c_str(), 0700) != 0 || std::atexit(remove_scratch) != 0)
      std::abort();
    return made;
  }());
  return once;
}

void remove_scratch()
{
  std::error_code ignored;
  std::filesystem::remove_all(scratch().base, ignored);
}

// Makes each missing directory of path (in the scratch directory) and writes bytes there.
bool write_file(const std::string& path, std::string_view bytes)
{
  for (size_t at = scratch().base.size() + 1; (at = path.find('/', at)) != std::string::npos; ++at)
    ::mkdir(path.substr(0, at).c_str(), 0700);
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  return fd.valid() &&
         ::write(fd.get(), bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
}

UniqueFd memory_file(std::string_view bytes)
{
  UniqueFd fd(::memfd_create("fuzzed", MFD_CLOEXEC));
  if (!fd.valid() ||
      ::write(fd.get(), bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size()))
    std::abort();
  return fd;
}

std::string build_id_of(std::string_view image)
{
  auto reader = ElfReader::open(ElfBytes::memory(image), "fuzzed");
  return reader ? reader->build_id() : std::string();
}

void check_xz(std::string_view input)
{
  auto output = xz_decompress(input, kMaxMiniDebugInfoBytes, kMaxXzDecoderBytes);
  if (output && output->size() > kMaxMiniDebugInfoBytes)
    std::abort();
}

// Every name found in the file's loaded bytes is within its budget, and a cut one says so.
void check_lookups(const ElfSymbols& symbols, std::string_view image)
{
  auto reader = ElfReader::open(ElfBytes::memory(image), "fuzzed");
  if (!reader)
    return;
  size_t lookups = 0;
  for (const auto& segment : reader->segments()) {
    if (segment.type != PT_LOAD)
      continue;
    uint64_t step = segment.file_size / 256 + 1;
    for (uint64_t offset = segment.offset;
         offset - segment.offset < segment.file_size && lookups < 4096; offset += step) {
      ++lookups;
      auto match = symbols.match_file_offset(offset);
      if (!match)
        continue;
      if (match->name.empty() ||
          match->name.size() > std::max(kMaxSymbolNameBytes, kMaxDemangledBytes) ||
          (match->cut && !match->name.ends_with(kTruncated)))
        std::abort();
    }
  }
}

// Symbols from a debug file only if the file checked is the one written, and it passed.
void check_source(const ElfSymbols& symbols,
                  uint8_t flags,
                  std::string_view image,
                  std::string_view debug,
                  const std::optional<DebugLink>& link)
{
  const std::string& from = symbols.symbols_from();
  if (from == ".symtab" || from == ".dynsym" || from == ".gnu_debugdata")
    return;
  std::string build_id = build_id_of(image);
  bool same_build = !build_id.empty() && build_id_of(debug) == build_id;
  if (from.starts_with("/usr/lib/debug/.build-id/")) {
    if (!(flags & kByBuildId) || !same_build)
      std::abort();
  } else if (from.starts_with("debuginfod:")) {
    if (!(flags & kInCache) || !same_build)
      std::abort();
  } else if (link && from == "/bin/" + link->name) {
    uLong crc = crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(debug.data()),
                      static_cast<uInt>(debug.size()));
    if (!(flags & kByLink) || static_cast<uint32_t>(crc) != link->crc)
      std::abort();
  } else {
    std::abort();
  }
}

std::optional<DebugLink> link_of(std::string_view image)
{
  auto reader = ElfReader::open(ElfBytes::memory(image), "fuzzed");
  if (!reader)
    return std::nullopt;
  const ElfSection* section = reader->section_named(".gnu_debuglink");
  if (!section)
    return std::nullopt;
  auto content = reader->read_section(*section, kMaxDebugLinkBytes);
  if (!content || content->cut)
    return std::nullopt;
  return parse_debug_link(content->bytes);
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***)
{
  // A refused debug file costs a warning; millions of them would only slow the fuzzer.
  spdlog::set_level(spdlog::level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  if (size < 1)
    return 0;
  uint8_t flags = data[0];
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (flags & kXzOnly) {
    check_xz(input);
    return 0;
  }
  std::string_view image = input;
  std::string_view debug;
  if (size_t at = input.find(kSeparator); at != std::string_view::npos) {
    image = input.substr(0, at);
    debug = input.substr(at + kSeparator.size());
  }

  Scratch& where = scratch();
  std::vector<std::string> written;
  std::string build_id = build_id_of(image);
  std::optional<DebugLink> link = link_of(image);
  if (!debug.empty()) {
    std::string id = hex(build_id);
    if ((flags & kByBuildId) && id.size() >= 4 && build_id.size() <= kMaxBuildIdBytes)
      written.push_back(where.root + std::string(kDebugDirectory) + "/.build-id/" +
                        id.substr(0, 2) + "/" + id.substr(2) + ".debug");
    if ((flags & kByLink) && link)
      written.push_back(where.root + "/bin/" + link->name);
    if ((flags & kInCache) && id.size() >= 4 && build_id.size() <= kMaxBuildIdBytes)
      written.push_back(where.cache + "/" + id + "/debuginfo");
    for (const auto& path : written) {
      if (!write_file(path, debug))
        std::abort();
    }
  }
  // Only a build ID the cache holds is asked of the fetcher, so it never goes to the network
  // (nothing listens on the discard port, should it).
  std::unique_ptr<DebugFetcher> fetcher;
  if (!debug.empty() && (flags & kInCache)) {
    auto started =
        DebugFetcher::start({"http://127.0.0.1:9", where.cache, std::chrono::seconds(1)});
    if (!started)
      std::abort();
    fetcher = std::move(*started);
  }

  std::vector<DebugRoot> roots;
  auto root = open_directory(where.root);
  if (!root)
    std::abort();
  roots.push_back({std::move(*root), kResolveInRoot, where.root, true});

  UniqueFd file = memory_file(image);
  if (where.first_free_fd < 0)
    where.first_free_fd = file.get();
  else if (file.get() > where.first_free_fd + 64)
    std::abort(); // descriptors leak
  auto symbols =
      ElfSymbols::open(std::move(file), std::string(kFilePath), roots, "fuzzed", fetcher.get());
  if (symbols) {
    const ElfSymbols& read = **symbols;
    if (read.build_id() != hex(build_id) || read.memory_bytes() > kMaxMemoryBytes)
      std::abort();
    check_source(read, flags, image, debug, link);
    check_lookups(read, image);
    read.take_inline_source();
  }
  fetcher.reset();

  for (const auto& path : written) {
    ::unlink(path.c_str());
    ::rmdir(path.substr(0, path.rfind('/')).c_str());
  }
  return 0;
}
