#include "cli/options.h"

#include <algorithm>
#include <cstdlib>

#include "common/build_info.h"
#include "dumps/dump_files.h"
#include "emit/formats.h"

namespace flamebpf::cli {
namespace {

// Validators that say what was wrong in one line, as CLI11 reports them.
const CLI::Validator kDuration(
    [](std::string& text) {
      return dumps::parse_duration(text) ? std::string()
                                         : "not a duration like 90s, 30m, 12h or 7d";
    },
    "DURATION");
const CLI::Validator kSize(
    [](std::string& text) {
      return dumps::parse_size(text) ? std::string() : "not a size like 500M or 2G";
    },
    "SIZE");
const CLI::Validator kTime(
    [](std::string& text) {
      return dumps::parse_time(text, std::chrono::system_clock::now())
                 ? std::string()
                 : "not a time like 2026-11-22T16:20:00Z, @1795000000 or -30m";
    },
    "TIME");
const CLI::Validator kFormat(
    [](std::string& text) {
      return emit::parse_format(text) ? std::string() : "not one of folded, svg, pprof";
    },
    "FORMAT");

void add_graph_options(CLI::App& app, Config& config)
{
  app.add_option("--title", config.graph.title, "Flame graph title");
  app.add_option("--width", config.graph.width, "Flame graph width in pixels")
      ->check(CLI::Range(200u, 100000u))
      ->capture_default_str();
  app.add_flag("--inverted", config.graph.inverted, "Icicle graph: the root at the top");
  app.add_option("--min-width", config.graph.min_frame_width,
                 "Leave out frames narrower than this many pixels")
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str();
}

} // namespace

void add_options(CLI::App& app, Config& config)
{
  // Empty until --title sets it: finish_parse gives it the default of the command then.
  config.graph.title.clear();
  app.description("flamebpf: CPU profiler for hosts, processes and containers (eBPF)");
  app.set_version_flag("--version", build_info::version_line());
  app.add_option("-F,--frequency", config.frequency_hz, "Samples per second per CPU")
      ->check(CLI::Range(1u, 100000u))
      ->capture_default_str();
  app.add_option("-d,--duration", config.duration_seconds,
                 "Stop after this many seconds (default: until Ctrl-C)")
      ->check(CLI::PositiveNumber);
  app.add_option("--interval", config.interval_seconds,
                 "Seconds between drains of the in-kernel counts")
      ->check(CLI::Range(0.01, 86400.0))
      ->capture_default_str();
  auto* output = app.add_option(
      "-o,--output", config.output,
      "Output file: FILE.svg (flame graph), FILE.pb.gz (pprof), else folded, or - for stdout "
      "(default: ./flamebpf-<UTC time>.folded and .svg); with several targets, one file per "
      "target: FILE.<target>.<ext>");
  app.add_option("-p,--pid", config.pids, "Profile only this process (repeatable)")
      ->check(CLI::PositiveNumber);
  app.add_option("-c,--cgroup", config.cgroups,
                 "Profile only this container or cgroup, with every cgroup below it: a container "
                 "ID (or unique prefix) or name, a pod UID, or a cgroup2 directory, absolute or "
                 "relative to the cgroup2 mount (repeatable)");
  auto* all = app.add_flag("--all-containers", config.all_containers,
                           "Profile every container, including those that start later; samples "
                           "outside containers go to the target \"host\"");
  app.add_flag("--containers-only", config.containers_only,
               "With --all-containers: leave out samples outside containers")
      ->needs(all);
  app.add_flag("--target-frame", config.target_frame,
               "Start every stack with its target's name, so one file separates targets");
  runtimes::add_runtime_options(app, config.runtimes);
  app.add_option("--debuginfod", config.debuginfod_urls,
                 "Fetch the debug files of stripped files by build ID from these debuginfod "
                 "servers (space-separated URLs), in the background; never from "
                 "$DEBUGINFOD_URLS, which would send every container's build IDs there unasked");
  app.add_option("--debuginfod-cache", config.debuginfod_cache,
                 "Where fetched debug files are kept; it and the directories above it must be "
                 "root's alone")
      ->capture_default_str();
  app.add_option("--debuginfod-cache-size", config.debuginfod_cache_mib,
                 "MiB the debuginfod cache may hold; past it, the debug files used longest ago "
                 "are removed")
      ->check(CLI::Range(1u, 1u << 20))
      ->capture_default_str();
  app.add_option("--debuginfod-timeout", config.debuginfod_timeout_seconds,
                 "Seconds a whole fetch may take")
      ->check(CLI::Range(1u, 3600u))
      ->capture_default_str();
  app.add_option("--stack-storage", config.stack_storage,
                 "Distinct stacks kept in the kernel per interval")
      ->check(CLI::Range(64u, 1u << 22))
      ->capture_default_str();
  app.add_option("--unwind-memory", config.unwind_memory_mib,
                 "MiB of kernel memory at most for the unwind tables of code built without "
                 "frame pointers, taken 1 MiB at a time as they need it (0: frame pointers only)")
      ->check(CLI::Range(0u, 1u << 12))
      ->capture_default_str();
  app.add_option("--target-memory", config.target_memory_mib,
                 "MiB at most of what targets make flamebpf hold (their perf maps' names, "
                 "runtimes' records, ELF symbols), shared among them: one target may hold the "
                 "larger of its "
                 "part and a sixteenth")
      ->check(CLI::Range(16u, 1u << 16))
      ->capture_default_str();
  app.add_option("--count-storage", config.count_storage,
                 "Distinct (process, stack) counts kept in the kernel per interval")
      ->check(CLI::Range(64u, 1u << 22))
      ->capture_default_str();
  app.add_flag("-v,--verbose", config.verbose, "Debug logging, including libbpf's");
  add_graph_options(app, config);

  app.add_option("--output-dir", config.output_dir,
                 "Agent mode: every --interval (default 60 s here), write "
                 "DIR/<target>/<UTC start>_<UTC end>.<format> for each target with samples")
      ->excludes(output);
  app.add_option_function<std::vector<std::string>>(
         "--format",
         [&config](const std::vector<std::string>& names) {
           config.formats.clear();
           for (const auto& name : names) {
             auto format = emit::parse_format(name); // checked by kFormat
             if (format && std::find(config.formats.begin(), config.formats.end(), *format) ==
                               config.formats.end())
               config.formats.push_back(*format);
           }
         },
         "Formats of each dump: folded, svg, pprof")
      ->delimiter(',')
      ->check(kFormat)
      ->default_str("[folded,svg]");
  app.add_option_function<std::string>(
         "--retain-age",
         [&config](const std::string& text) {
           config.retention.max_age = dumps::parse_duration(text);
         },
         "Remove dumps older than this (e.g. 7d)")
      ->check(kDuration);
  app.add_option_function<uint64_t>(
         "--retain-count", [&config](uint64_t count) { config.retention.max_count = count; },
         "Keep at most this many dumps per target")
      ->check(CLI::PositiveNumber);
  app.add_option_function<std::string>(
         "--retain-size",
         [&config](const std::string& text) {
           config.retention.max_bytes = dumps::parse_size(text);
         },
         "Keep at most this much of dumps per target (e.g. 2G)")
      ->check(kSize);
  app.add_flag("--diff-previous", config.diff_previous,
               "Also write, each interval, a differential SVG against the previous interval");
  auto* listen = app.add_option("--listen", config.listen,
                                "Agent mode: serve pprof, folded stacks and SVG of the dumps, and "
                                "Prometheus metrics, over HTTP on [ADDR:]PORT (127.0.0.1 unless "
                                "given)")
                     ->needs("--output-dir");
  app.add_option("--listen-token-file", config.listen_token_file,
                 "A file holding the bearer token every request to --listen must carry")
      ->needs(listen);
  app.add_flag("--listen-insecure", config.listen_insecure,
               "Let --listen serve beyond this machine without a token")
      ->needs(listen);

  auto* render = app.add_subcommand(
      "render", "Draw folded stacks (flamebpf's, flamegraph.pl's, inferno's, stackcollapse's)");
  render->add_option("inputs", config.render_inputs, "Folded files, summed; - for stdin")
      ->required();
  render
      ->add_option("-o,--output", config.output,
                   "Output: FILE.svg, FILE.pb.gz or folded text (- stdout)")
      ->required();
  add_graph_options(*render, config);

  auto* diff = app.add_subcommand(
      "diff", "Differential flame graph of two folded files: red grew, blue shrank");
  diff->add_option("before", config.diff_before, "The baseline folded file")->required();
  diff->add_option("after", config.diff_after, "The folded file compared with it")->required();
  diff->add_option("-o,--output", config.output,
                   "Output: FILE.svg, or \"stack before after\" lines (difffolded's form)")
      ->required();
  diff->add_flag("--normalize", config.normalize, "Scale before's counts to after's total samples");
  diff->add_flag("--negate", config.negate, "Draw over before's shape instead of after's");
  add_graph_options(*diff, config);

  auto* merge = app.add_subcommand(
      "merge", "Sum the dumps of one target (agent mode) whose windows fall in a time range");
  merge->add_option("directory", config.merge_dir, "The target's directory: DIR/<target>")
      ->required();
  merge
      ->add_option_function<std::string>(
          "--from",
          [&config](const std::string& text) {
            config.merge_from = dumps::parse_time(text, dumps::Clock::now());
          },
          "Start of the range (default: the first dump)")
      ->check(kTime);
  merge
      ->add_option_function<std::string>(
          "--to",
          [&config](const std::string& text) {
            config.merge_to = dumps::parse_time(text, dumps::Clock::now());
          },
          "End of the range (default: the last dump)")
      ->check(kTime);
  merge->add_option("-o,--output", config.output, "Output: FILE.svg, FILE.pb.gz or folded text")
      ->required();
  add_graph_options(*merge, config);

  auto* top = app.add_subcommand(
      "top", "A live view of the hottest functions of the targets, refreshed every --interval "
             "(default 1 s); takes the recording's options (--cgroup, --pid, --all-containers, "
             "-F, --interval, -d)");
  // The recording's options, given after "top", are the main command's.
  top->fallthrough();
  top->add_flag("--batch", config.batch,
                "Print a plain-text snapshot per interval instead of the full-screen view "
                "(the default when standard output is no terminal or TERM is dumb)");
}

void finish_parse(const CLI::App& app, Config& config)
{
  if (app.got_subcommand("top")) {
    config.mode = Mode::kTop;
    // The view refreshes every second unless asked otherwise.
    if (app.count("--interval") == 0)
      config.interval_seconds = 1;
  }
  if (app.got_subcommand("render"))
    config.mode = Mode::kRender;
  else if (app.got_subcommand("diff"))
    config.mode = Mode::kDiff;
  else if (app.got_subcommand("merge"))
    config.mode = Mode::kMerge;
  if (config.graph.title.empty())
    config.graph.title =
        config.mode == Mode::kDiff ? emit::kDifferentialTitle : emit::kDefaultTitle;
  // Agent mode writes one set of dumps per interval: a minute unless asked otherwise.
  if (!config.output_dir.empty() && app.count("--interval") == 0)
    config.interval_seconds = 60;
}

} // namespace flamebpf::cli
