// Command-line options: argv -> Config, with no side effects. Every value is parsed here, once:
// the stages receive durations, sizes, times and formats, never the text they were given as.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dumps/dump_files.h"
#include "dumps/retention.h"
#include "emit/formats.h"
#include "emit/svg.h"
#include "runtimes/runtime_options.h"

namespace flamebpf::cli {

// What the command line asks for: a recording (the default), or a command on folded files.
enum class Mode { kRecord, kRender, kDiff, kMerge, kTop };

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
  runtimes::RuntimeOptions runtimes;
  uint32_t stack_storage = 8192;
  // MiB of kernel memory for the unwind tables of code without frame pointers; 0: unwind by
  // frame pointers only.
  uint32_t unwind_memory_mib = 32;
  // What targets may make flamebpf hold (names, unwind records, symbols), shared among them.
  uint32_t target_memory_mib = 1024;
  uint32_t count_storage = 16384;
  bool verbose = false;
  // debuginfod servers to fetch missing debug files from (space-separated): --debuginfod only;
  // empty: none.
  std::string debuginfod_urls;
  std::string debuginfod_cache = "/var/cache/flamebpf/debuginfod";
  uint32_t debuginfod_cache_mib = 2048;
  uint32_t debuginfod_timeout_seconds = 30;

  // Flame graphs (recording or dumps with SVG, render, diff, merge): --title, else the command's
  // default (emit::kDefaultTitle, or emit::kDifferentialTitle for diff), --width, --inverted and
  // --min-width. Callers add what is theirs: subtitle, target_frame.
  emit::SvgOptions graph;
  std::vector<std::string> render_inputs; // render: folded files, summed
  std::string diff_before;                // diff: the baseline folded file
  std::string diff_after;                 // diff: the folded file compared with it
  bool normalize = false;                 // diff: scale before to after's total samples
  bool negate = false;                    // diff: draw over before's shape

  // Agent mode (--output-dir): periodic dumps.
  std::string output_dir; // empty: recording mode
  std::vector<emit::Format> formats{emit::Format::kFolded,
                                    emit::Format::kSvg}; // of each dump, each once
  dumps::RetentionPolicy retention;                      // --retain-age, -count, -size
  bool diff_previous = false; // a differential SVG against the previous interval
  // --listen: serve the dumps and metrics over HTTP (serve/profile_routes.h); empty: off.
  std::string listen;
  std::string listen_token_file; // the bearer token every request must carry
  bool listen_insecure = false;  // beyond loopback without a token, on purpose

  // top: the live view; batch prints a plain-text snapshot per interval instead.
  bool batch = false;

  // merge: sum the dumps of one target over a time range.
  std::string merge_dir;                              // DIR/<target>
  std::optional<dumps::Clock::time_point> merge_from; // none: from the first dump
  std::optional<dumps::Clock::time_point> merge_to;   // none: to the last dump
  std::chrono::steady_clock::time_point started_at;   // set by main, for start-up timing
};

// Declares every option and subcommand on app, writing into config.
void add_options(CLI::App& app, Config& config);

// Sets config.mode from the subcommand app parsed, and what depends on it (the default title and
// interval); call after app.parse().
void finish_parse(const CLI::App& app, Config& config);

} // namespace flamebpf::cli
