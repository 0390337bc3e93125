// What a user chooses of the runtimes (runtimes.h), and the command-line options that choose it:
// the CLI adds every runtime's options with one call, so a runtime's options change here only.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace flamebpf::runtimes {

struct RuntimeOptions {
  bool java_signatures = false; // Java frames with their parameter types
  bool attach = true;           // load flamebpf's agent into JVMs that keep no perf map
  // Set by the recorder, not by options: the sampler unwinds by the tables runtimes give (the
  // unwinder is on), and where /proc is.
  bool unwinder = false;
  std::string proc_root = "/proc";
};

void add_runtime_options(CLI::App& app, RuntimeOptions& options);

} // namespace flamebpf::runtimes
