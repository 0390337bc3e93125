#include "pipeline/dump_sink.h"

#include "common/log.h"

namespace flamebpf::pipeline {

Result<std::unique_ptr<DumpSink>> DumpSink::open(const cli::Config& config,
                                                 const std::shared_ptr<MemoryAccount>& memory)
{
  dumps::DumpOptions options;
  options.directory = config.output_dir;
  options.formats = config.formats;
  options.retention = config.retention;
  options.diff_previous = config.diff_previous;
  options.svg = config.graph;
  options.svg.target_frame = config.target_frame;
  auto writer = dumps::DumpWriter::open(std::move(options));
  if (!writer)
    return fail(writer.error());
  if (memory)
    writer->measure_memory(memory);
  auto interval = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(config.interval_seconds));
  return std::unique_ptr<DumpSink>(
      new DumpSink(std::make_shared<dumps::DumpWriter>(std::move(*writer)), interval));
}

DumpSink::DumpSink(std::shared_ptr<dumps::DumpWriter> writer, std::chrono::nanoseconds interval)
    : writer_(std::move(writer)), interval_(interval)
{
}

void DumpSink::targets_added(const std::vector<target::Target>& added)
{
  targets_ += added.size();
}

Result<> DumpSink::consume(const profile::SymbolizedProfile& interval, IntervalFacts& facts)
{
  ++intervals_;
  dumps::DumpReport report = writer_->write(interval, facts.window, facts.coverage);
  files_ += report.files;
  // A full disk is said once per interval; sampling goes on and the writes are retried.
  if (!report.error.empty())
    spdlog::error("{}; {} intervals kept in memory, retried at the next one", report.error,
                  report.pending);
  facts.dumps = std::move(report);
  return {};
}

Result<> DumpSink::finish(RecordSummary& summary)
{
  dumps::DumpReport last = writer_->flush();
  files_ += last.files;
  if (!last.error.empty())
    spdlog::error("{}; the dumps of {} intervals are lost", last.error, last.pending);
  summary.output_dir = writer_->options().directory;
  summary.intervals = intervals_;
  summary.dump_files = files_;
  summary.targets = targets_;
  return {};
}

} // namespace flamebpf::pipeline
