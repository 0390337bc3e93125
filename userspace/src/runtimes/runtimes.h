// The runtimes flamebpf knows (runtimes/runtime.h), in the order the symbolizer asks them: listed
// here, not registered by themselves (a static library's unreferenced objects are dropped).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtimes/runtime.h"
#include "runtimes/runtime_options.h"

namespace flamebpf::runtimes {

std::vector<std::unique_ptr<Runtime>> make_runtimes(const RuntimeOptions& options);

} // namespace flamebpf::runtimes
