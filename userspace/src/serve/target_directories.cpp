#include "serve/target_directories.h"

#include <algorithm>
#include <fcntl.h>
#include <sys/stat.h>

#include "common/unique_fd.h"
#include "dumps/dump_files.h"

namespace flamebpf::serve {

std::vector<std::string> subdirectories(const std::string& directory)
{
  std::vector<std::string> names;
  UniqueFd fd(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid())
    return names;
  for (auto& name : dumps::names_in(fd.get())) {
    struct stat status {};
    if (::fstatat(fd.get(), name.c_str(), &status, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISDIR(status.st_mode))
      names.push_back(std::move(name));
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::optional<std::string> find_target_directory(const std::string& output_dir,
                                                 std::string_view target)
{
  for (const auto& name : subdirectories(output_dir)) {
    if (name == target)
      return output_dir + "/" + name;
  }
  return std::nullopt;
}

} // namespace flamebpf::serve
