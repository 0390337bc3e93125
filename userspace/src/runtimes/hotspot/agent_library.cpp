#include "runtimes/hotspot/agent_library.h"

extern "C" const unsigned char flamebpf_agent_library_start[];
extern "C" const unsigned char flamebpf_agent_library_end[];

namespace flamebpf::hotspot {

std::span<const unsigned char> agent_library()
{
  return {flamebpf_agent_library_start, flamebpf_agent_library_end};
}

} // namespace flamebpf::hotspot
