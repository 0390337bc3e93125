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

} // namespace flamebpf
