// The one logger: spdlog to stderr, "flamebpf: level: message".
#pragma once

#include <spdlog/spdlog.h>

namespace flamebpf::log {

// Sets up the logger; verbose shows debug messages, including libbpf's.
void init(bool verbose);

// Whether -v was given.
bool verbose();

} // namespace flamebpf::log
