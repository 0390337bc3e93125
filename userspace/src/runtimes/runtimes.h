// The runtimes flamebpf knows (runtimes/runtime.h), in the order the symbolizer asks them: listed
// here, not registered by themselves (a static library's unreferenced objects are dropped).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtimes/runtime.h"

namespace flamebpf::runtimes {

struct RuntimeOptions {
  bool java_signatures = false; // Java frames with their parameter types
  bool attach = true;           // load flamebpf's agent into JVMs (--no-attach: not)
  // The sampler unwinds by the tables runtimes give (the unwinder is on).
  bool unwinder = false;
  std::string proc_root = "/proc";
};

std::vector<std::unique_ptr<Runtime>> make_runtimes(const RuntimeOptions& options);

} // namespace flamebpf::runtimes
