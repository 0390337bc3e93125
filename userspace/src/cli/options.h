// Command-line options: argv -> Config, with no side effects.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace flamebpf::cli {

struct Config {
  uint32_t frequency_hz = 99;
  double duration_seconds = 0; // 0: until SIGINT/SIGTERM
  double interval_seconds = 2; // how often the kernel maps are drained
  std::string output;          // empty: ./flamebpf-<UTC time>.folded; "-": stdout
  std::vector<uint32_t> pids;
  std::vector<std::string> cgroups; // cgroup paths, container IDs or names, pod UIDs
  bool all_containers = false;
  bool containers_only = false;
  bool target_frame = false;
  bool java_signatures = false; // Java frames with parameter types
  bool attach = true;           // attach flamebpf's agent to JVMs that keep no perf map
  uint32_t stack_storage = 8192;
  uint32_t count_storage = 16384;
  bool verbose = false;
  std::chrono::steady_clock::time_point started_at; // set by main, for start-up timing
};

// Declares every option on app, writing into config.
void add_options(CLI::App& app, Config& config);

} // namespace flamebpf::cli
