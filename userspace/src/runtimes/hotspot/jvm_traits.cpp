#include "runtimes/hotspot/jvm_traits.h"

#include <algorithm>
#include <string_view>

namespace flamebpf::hotspot {

JvmTraits jvm_traits(const std::vector<procfs::Mapping>& mappings)
{
  JvmTraits traits;
  bool openj9 = false;
  for (const auto& mapping : mappings) {
    std::string_view file = mapping.path;
    file.remove_prefix(std::min(file.size(), file.rfind('/') + 1));
    // HotSpot's: OpenJ9 has a libjvm.so too, but answers SIGQUIT with a javacore dump.
    traits.hotspot |= file == "libjvm.so";
    openj9 |= file.starts_with("libj9vm");
    traits.launcher |= file == "libjli.so";
    traits.keeps_perf_map |= file.starts_with("libflamebpf-agent") || file == "libperfmap.so";
  }
  traits.hotspot &= !openj9;
  return traits;
}

} // namespace flamebpf::hotspot
