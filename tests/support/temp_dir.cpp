#include "temp_dir.h"

#include <cerrno>
#include <cstdlib>
#include <string>
#include <system_error>

namespace flamebpf::testing {

TempDir::TempDir(const std::filesystem::path& parent, std::filesystem::perms mode)
{
  std::string pattern = (parent / "flamebpf-test.XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr)
    throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
  path_ = pattern;
  // mkdtemp makes it 0700; a directory a target's user reads from needs more.
  std::filesystem::permissions(path_, mode);
}

TempDir::~TempDir()
{
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

} // namespace flamebpf::testing
