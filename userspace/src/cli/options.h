// Command-line options: argv -> Config, with no side effects.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace flamebpf::cli {

// What the command line asks for: a recording (the default), or a command on folded files.
enum class Mode { kRecord, kRender, kDiff, kMerge };

struct Config {
  Mode mode = Mode::kRecord;
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

  // Flame graphs (recording with -o FILE.svg, render, diff).
  std::string title;                      // empty: "Flame Graph" / "Differential Flame Graph"
  uint32_t width = 1200;                  // pixels
  bool inverted = false;                  // icicle graph
  double min_frame_width = 0.1;           // pixels; narrower frames are not drawn
  std::vector<std::string> render_inputs; // render: folded files, summed
  std::string diff_before;                // diff: the baseline folded file
  std::string diff_after;                 // diff: the folded file compared with it
  bool normalize = false;                 // diff: scale before to after's total samples
  bool negate = false;                    // diff: draw over before's shape

  // Agent mode (--output-dir): periodic dumps.
  std::string output_dir;                            // empty: recording mode
  std::vector<std::string> formats{"folded", "svg"}; // of each dump
  std::string retain_age;                            // e.g. "7d"; empty: no limit
  uint64_t retain_count = 0;                         // dumps per target; 0: no limit
  std::string retain_size;                           // e.g. "2G"; empty: no limit
  bool diff_previous = false; // a differential SVG against the previous interval

  // merge: sum the dumps of one target over a time range.
  std::string merge_dir;                            // DIR/<target>
  std::string merge_from;                           // empty: from the first dump
  std::string merge_to;                             // empty: to the last dump
  std::chrono::steady_clock::time_point started_at; // set by main, for start-up timing
};

// Declares every option and subcommand on app, writing into config.
void add_options(CLI::App& app, Config& config);

// Sets config.mode from the subcommand app parsed; call after app.parse().
void finish_parse(const CLI::App& app, Config& config);

} // namespace flamebpf::cli
