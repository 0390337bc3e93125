// What flamebpf parses to find cgroups and containers: /proc/<pid>/mountinfo, /proc/<pid>/cgroup
// and cgroup paths (which a container's runtime or anyone with write access to a cgroup names).
// Input: mountinfo text, then a NUL byte, then /proc/<pid>/cgroup text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/procfs.h"
#include "target/container_cgroup.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  std::string_view text(reinterpret_cast<const char*>(data), size);
  size_t nul = text.find('\0');
  std::string_view mountinfo = text.substr(0, nul);
  std::string_view cgroup = nul == std::string_view::npos ? "" : text.substr(nul + 1);

  auto mounts = flamebpf::procfs::parse_mountinfo(mountinfo);
  if (auto mount = flamebpf::procfs::find_cgroup2_mount(mounts); mount && mount->empty())
    std::abort();
  // The path flamebpf follows a process by, then the container it is taken for.
  if (auto path = flamebpf::procfs::parse_cgroup2_path(cgroup)) {
    if (!path->starts_with('/'))
      std::abort();
    if (auto match = flamebpf::target::container_of_cgroup(*path)) {
      // The container's cgroup is a prefix of the path it was found in (as the kernel writes
      // paths: without repeated slashes) and ends in a component naming the ID.
      std::string collapsed;
      for (char c : *path) {
        if (c != '/' || collapsed.empty() || collapsed.back() != '/')
          collapsed += c;
      }
      if (match->id.empty() || !collapsed.starts_with(match->cgroup) ||
          match->cgroup.find(match->id) == std::string::npos)
        std::abort();
    }
  }
  flamebpf::procfs::parse_cpu_list(mountinfo);
  return 0;
}
