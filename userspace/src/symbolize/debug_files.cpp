#include "symbolize/debug_files.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "common/contained_file.h"
#include "common/elf_reader.h"

namespace flamebpf::symbolize {
namespace {

constexpr std::string_view kDeleted = " (deleted)";

// A file name for a link: what the kernel accepts as one path component, printable, so that it
// builds no other path and prints as itself.
bool plain_file_name(std::string_view name)
{
  if (name.empty() || name.size() > NAME_MAX || name == "." || name == "..")
    return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    auto byte = static_cast<unsigned char>(c);
    return byte > 0x20 && byte != 0x7f && c != '/';
  });
}

// The directory of an absolute, clean path ("/usr/lib" for "/usr/lib/libc.so.6", "" for
// "/init"); nullopt if the path is not absolute and clean.
std::optional<std::string> directory_of(std::string_view path)
{
  if (!path.starts_with('/') || path.ends_with(kDeleted) || path.size() > PATH_MAX)
    return std::nullopt;
  size_t last = path.rfind('/');
  std::string_view directory = path.substr(0, last);
  if (!plain_file_name(path.substr(last + 1)))
    return std::nullopt;
  // Every component of the directory must be a plain name too: no "", ".", "..".
  for (size_t at = 0; at < directory.size();) {
    size_t next = directory.find('/', at + 1);
    if (next == std::string_view::npos)
      next = directory.size();
    std::string_view component = directory.substr(at + 1, next - at - 1);
    if (component.empty() || component == "." || component == "..")
      return std::nullopt;
    at = next;
  }
  if (directory.find('\0') != std::string_view::npos)
    return std::nullopt;
  return std::string(directory);
}

} // namespace

std::optional<DebugLink> parse_debug_link(std::string_view section)
{
  auto end = section.find('\0');
  if (end == std::string_view::npos)
    return std::nullopt;
  std::string_view name = section.substr(0, end);
  size_t crc_at = (end + 1 + 3) / 4 * 4;
  if (!plain_file_name(name) || crc_at + 4 > section.size())
    return std::nullopt;
  uint32_t crc = 0;
  std::memcpy(&crc, section.data() + crc_at, sizeof crc);
  return DebugLink{std::string(name), crc};
}

std::string hex(std::string_view bytes)
{
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text;
  text.reserve(bytes.size() * 2);
  for (char c : bytes) {
    auto byte = static_cast<unsigned char>(c);
    text.push_back(kDigits[byte >> 4]);
    text.push_back(kDigits[byte & 0xf]);
  }
  return text;
}

std::vector<DebugCandidate> debug_candidates(std::string_view file_path,
                                             std::string_view build_id,
                                             const std::optional<DebugLink>& link,
                                             bool beside_file)
{
  std::vector<DebugCandidate> candidates;
  const std::string debug(kDebugDirectory);
  if (build_id.size() >= 2 && build_id.size() <= kMaxBuildIdBytes) {
    std::string id = hex(build_id);
    candidates.push_back({debug + "/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug",
                          DebugCheck::kBuildId});
  }
  auto directory = directory_of(file_path);
  if (link && plain_file_name(link->name) && directory) {
    if (beside_file) {
      candidates.push_back({*directory + "/" + link->name, DebugCheck::kCrc});
      candidates.push_back({*directory + "/.debug/" + link->name, DebugCheck::kCrc});
    }
    candidates.push_back({debug + *directory + "/" + link->name, DebugCheck::kCrc});
  }
  return candidates;
}

Result<uint32_t> file_crc32(int fd, uint64_t max_bytes)
{
  uLong crc = crc32(0L, Z_NULL, 0);
  char buffer[64 << 10];
  uint64_t done = 0;
  for (;;) {
    ssize_t n = ::pread(fd, buffer, sizeof buffer, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return fail(system_error(errno, "read failed"));
    if (n == 0)
      break;
    done += static_cast<uint64_t>(n);
    if (done > max_bytes)
      return fail(Error{EFBIG, "larger than " + std::to_string(max_bytes) + " bytes"});
    crc = crc32(crc, reinterpret_cast<const Bytef*>(buffer), static_cast<uInt>(n));
  }
  return static_cast<uint32_t>(crc);
}

std::optional<DebugFile> find_debug_file(const std::vector<DebugRoot>& roots,
                                         const DebugQuery& query,
                                         std::vector<std::string>& refused)
{
  for (const auto& root : roots) {
    for (const auto& candidate :
         debug_candidates(query.file_path, query.build_id, query.link, root.beside_file)) {
      std::string shown = root.shown + candidate.path;
      auto fd = open_regular_at(root.dir.get(), candidate.path, root.resolve, shown);
      if (!fd) {
        if (fd.error().errno_value != ENOENT && fd.error().errno_value != ENOTDIR)
          refused.push_back(fd.error().message);
        continue;
      }
      struct stat status {};
      if (::fstat(fd->get(), &status) != 0 ||
          (status.st_dev == query.device && status.st_ino == query.inode))
        continue;
      if (candidate.check == DebugCheck::kBuildId) {
        auto reader = ElfReader::open(
            ElfBytes::file(fd->get(), static_cast<uint64_t>(status.st_size)), shown);
        if (!reader) {
          refused.push_back(reader.error().message);
          continue;
        }
        if (reader->build_id() != query.build_id) {
          refused.push_back(shown + ": build ID " + hex(reader->build_id()) + " is not " +
                            hex(query.build_id));
          continue;
        }
      } else {
        auto crc = file_crc32(fd->get(), kMaxDebugFileCrcBytes);
        if (!crc) {
          refused.push_back("cannot check " + shown + ": " + crc.error().message);
          continue;
        }
        if (*crc != query.link->crc) {
          refused.push_back(shown + ": CRC does not match .gnu_debuglink");
          continue;
        }
      }
      return DebugFile{std::move(*fd), candidate.path, shown};
    }
  }
  return std::nullopt;
}

} // namespace flamebpf::symbolize
