#include "common/mapped_file.h"

#include <cerrno>
#include <fcntl.h>
#include <fmt/format.h>
#include <string_view>
#include <sys/stat.h>

#include "common/contained_file.h"

namespace flamebpf {
namespace {

constexpr std::string_view kDeleted = " (deleted)";

} // namespace

Result<UniqueFd> open_mapped_file(const std::string& process, const procfs::Mapping& mapping)
{
  std::string via_map_files =
      fmt::format("{}/map_files/{:x}-{:x}", process, mapping.start, mapping.end);
  UniqueFd located(::open(via_map_files.c_str(), O_PATH | O_CLOEXEC));
  if (!located.valid() && mapping.path.ends_with(kDeleted))
    return fail(system_error(errno, "cannot open " + via_map_files));
  auto file = located.valid() ? reopen_regular(located.get(), via_map_files)
                              : open_contained(process + "/root", mapping.path);
  if (!file)
    return file;
  struct stat status {};
  if (::fstat(file->get(), &status) != 0)
    return fail(system_error(errno, "cannot stat " + mapping.path));
  if (status.st_ino != mapping.inode)
    return fail(error("cannot open " + mapping.path + ": inode " + std::to_string(status.st_ino) +
                      " is not the mapped file's " + std::to_string(mapping.inode)));
  return file;
}

Result<MappedElf>
open_mapped_elf(const std::string& process, const procfs::Mapping& mapping, bool record_reads)
{
  auto file = open_mapped_file(process, mapping);
  if (!file)
    return fail(file.error());
  struct stat status {};
  if (::fstat(file->get(), &status) != 0)
    return fail(system_error(errno, "cannot stat " + mapping.path));
  auto size = static_cast<uint64_t>(status.st_size);
  auto reads = record_reads ? std::make_shared<ReadRecord>(size) : nullptr;
  auto elf = ElfReader::open(ElfBytes::file(file->get(), size, reads.get()),
                             process + "/root" + mapping.path);
  if (!elf)
    return fail(elf.error());
  return MappedElf{std::move(*file), size, std::move(reads), std::move(*elf)};
}

} // namespace flamebpf
