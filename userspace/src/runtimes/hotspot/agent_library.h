// flamebpf's JVMTI agent (jvm-agent/), embedded in the flamebpf binary at build time, so that
// flamebpf can place it in any container without files of its own on the host.
#pragma once

#include <span>

namespace flamebpf::hotspot {

// The bytes of libflamebpf-agent.so.
std::span<const unsigned char> agent_library();

} // namespace flamebpf::hotspot
