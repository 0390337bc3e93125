#include "common/build_info.h"

// Generated at every build (cmake/build_info.cmake): only this file recompiles when the commit
// changes.
#include "build_info_generated.h"

namespace flamebpf::build_info {

std::string_view version()
{
  return FLAMEBPF_VERSION;
}

std::string_view commit()
{
  return FLAMEBPF_GIT_COMMIT;
}

bool modified()
{
  return FLAMEBPF_GIT_MODIFIED != 0;
}

std::string version_line()
{
  std::string line = "flamebpf " + std::string(version());
  if (commit().empty())
    return line + " (not built from a git checkout)";
  return line + " (commit " + std::string(commit()) + (modified() ? ", modified" : "") + ")";
}

} // namespace flamebpf::build_info
