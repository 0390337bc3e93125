// flamebpf: parse the command line, run the pipeline, choose the exit code.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <malloc.h>
#include <sys/resource.h>

#include "cli/options.h"
#include "common/host_namespaces.h"
#include "common/log.h"
#include "pipeline/recorder.h"
#include "pipeline/render.h"

namespace {

constexpr int kExitRuntimeFailure = 1;
constexpr int kExitUsage = 2;

} // namespace

int main(int argc, char** argv)
{
  flamebpf::cli::Config config;
  config.started_at = std::chrono::steady_clock::now();
  CLI::App app;
  flamebpf::cli::add_options(app, config);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& parse_error) {
    int code = app.exit(parse_error);
    return code == 0 ? 0 : kExitUsage;
  }
  flamebpf::cli::finish_parse(app, config);
  flamebpf::log::init(config.verbose);
  // Warnings held back by the log's rate limit are counted in one last line, however main ends.
  struct FlushSuppressedWarnings {
    ~FlushSuppressedWarnings() { flamebpf::log::flush_suppressed(); }
  } flush_suppressed_warnings;
  // top records as a recording does; render, diff and merge read folded files.
  if (config.mode != flamebpf::cli::Mode::kRecord && config.mode != flamebpf::cli::Mode::kTop) {
    auto done = config.mode == flamebpf::cli::Mode::kRender ? flamebpf::pipeline::render(config)
                : config.mode == flamebpf::cli::Mode::kDiff ? flamebpf::pipeline::diff(config)
                                                            : flamebpf::pipeline::merge(config);
    if (!done) {
      spdlog::error("{}", done.error().message);
      return done.error().usage ? kExitUsage : kExitRuntimeFailure;
    }
    return 0;
  }
  // The allocator's defaults keep what an agent frees in the weeks it runs: an arena for each
  // thread, and a size above which blocks are mapped that rises to the largest block freed, so the
  // peaks of symbol reads and index builds stayed resident for good (64 MiB against 36 on 40
  // containers, bench/scale.sh). Large blocks are mapped, and returned whole when freed; the
  // threads share two arenas. Before any thread exists.
  ::mallopt(M_MMAP_THRESHOLD, 256 << 10);
  ::mallopt(M_ARENA_MAX, 2);
  // Before any thread exists: a thread starts with its creator's capabilities.
  flamebpf::caps::limit_process(flamebpf::pipeline::capability_needs(config));
  // Every ELF file, perf map and container flamebpf reads costs a descriptor for a while: the
  // soft limit (often 1024) goes up to the hard one, which the service raises.
  if (rlimit files{}; ::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &files) != 0)
      spdlog::debug("cannot raise the open files limit to {}", files.rlim_max);
  }

  // In a container of its own (a DaemonSet's pod), cgroups and the node's name are the host's.
  for (const auto& entered : flamebpf::host_namespaces::enter_the_hosts())
    spdlog::debug("entered the host's {} namespace", entered);

  auto summary = flamebpf::pipeline::record(config);
  if (!summary) {
    spdlog::error("{}", summary.error().message);
    return summary.error().usage ? kExitUsage : kExitRuntimeFailure;
  }
  if (config.mode == flamebpf::cli::Mode::kTop)
    return 0;
  if (!summary->output_dir.empty()) {
    spdlog::info("wrote {} files of {} intervals to {}: {} targets in {:.1f} s",
                 summary->dump_files, summary->intervals, summary->output_dir, summary->targets,
                 summary->seconds);
    return 0;
  }
  if (summary->outputs.empty()) {
    // --all-containers --containers-only on a host where no container ran.
    spdlog::warn("no target had samples in {:.1f} s; no profile written", summary->seconds);
    return 0;
  }
  std::string written = summary->outputs.front().path;
  if (summary->outputs.size() > 1) {
    for (const auto& file : summary->outputs)
      spdlog::info("wrote {}: {} samples from {} processes", file.path, file.samples,
                   file.processes);
    written = std::to_string(summary->outputs.size()) + " profiles";
  }
  spdlog::info("wrote {}: {} samples from {} processes, {} targets, {} drops in {:.1f} s", written,
               summary->samples, summary->processes, summary->targets, summary->drops,
               summary->seconds);
  return 0;
}
