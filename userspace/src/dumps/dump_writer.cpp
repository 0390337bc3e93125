#include "dumps/dump_writer.h"

#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/atomic_file.h"
#include "common/log.h"
#include "emit/flame_tree.h"
#include "emit/svg.h"
#include "profile/by_target.h"

namespace flamebpf::dumps {
namespace {

// What a profile takes in memory, roughly: its stacks, their frames and names.
uint64_t profile_bytes(const profile::SymbolizedProfile& profile)
{
  uint64_t bytes = sizeof(profile) + profile.stacks.capacity() * sizeof(profile::Stack);
  for (const auto& stack : profile.stacks) {
    bytes += heap_bytes(stack.comm) + heap_bytes(stack.target) +
             heap_bytes(stack.pod_container_id) + stack.frames.capacity() * sizeof(profile::Frame);
    for (const auto& frame : stack.frames)
      bytes += heap_bytes(frame.name) + heap_bytes(frame.module);
  }
  return bytes;
}

const FileAccess kDumpAccess{kDumpFileMode, std::nullopt, 0};

} // namespace

DumpWriter::DumpWriter(DumpOptions options, UniqueFd directory)
    : options_(std::move(options)), directory_(std::move(directory))
{
}

Result<DumpWriter> DumpWriter::open(DumpOptions options)
{
  auto directory = open_private_directory(options.directory, true);
  if (!directory)
    return fail(Error{directory.error().errno_value, "--output-dir " + directory.error().message});
  DumpWriter writer(std::move(options), std::move(*directory));
  writer.clean_stale_temporaries();
  return writer;
}

void DumpWriter::clean_stale_temporaries()
{
  // One flamebpf writes a directory: a temporary there is a killed run's, never a reader's. Only
  // flamebpf's own are removed: files and links with a temporary's name and flamebpf's owner,
  // in target directories that are flamebpf's own.
  for (const auto& target : names_in(directory_.get())) {
    auto directory = open_private_subdirectory(directory_.get(), target, false,
                                               options_.directory + "/" + target);
    if (!directory)
      continue;
    for (const auto& file : names_in(directory->get())) {
      struct stat status {};
      if (!is_temporary_name(file) ||
          ::fstatat(directory->get(), file.c_str(), &status, AT_SYMLINK_NOFOLLOW) != 0 ||
          status.st_uid != ::geteuid() || !(S_ISREG(status.st_mode) || S_ISLNK(status.st_mode)))
        continue;
      ::unlinkat(directory->get(), file.c_str(), 0);
    }
  }
}

Result<DumpWriter::TargetWritten>
DumpWriter::write_target(const std::string& target,
                         const std::string& directory,
                         const profile::SymbolizedProfile& profile,
                         const Window& window,
                         const std::vector<profile::TargetCoverage>& coverage)
{
  std::string shown = options_.directory + "/" + directory;
  auto opened = open_private_subdirectory(directory_.get(), directory, true, shown);
  if (!opened)
    return fail(opened.error());
  int dir_fd = opened->get();
  std::string base = window_name(window);
  emit::SvgOptions svg = options_.svg;
  svg.subtitle = emit::describe_profile(profile, profile::coverage_of(coverage, target));
  TargetWritten written;
  auto write = [&](const std::string& file, std::string_view extension,
                   const ContentWriter& write_content) -> Result<> {
    if (auto done = write_file_at(dir_fd, file, kDumpAccess, write_content, shown + "/" + file);
        !done)
      return fail(done.error());
    ++written.files;
    // A relative link, replaced by a rename: readers find either the old newest or the new one.
    std::string latest = "latest" + std::string(extension);
    return replace_symlink_at(dir_fd, latest, file, shown + "/" + latest);
  };
  for (emit::Format format : options_.formats) {
    auto emitter = emit::make_emitter(format, svg);
    std::string file = base + std::string(emit::extension(format));
    if (auto done = write(file, emit::extension(format),
                          [&](std::ostream& out) { return emitter->write(profile, out); });
        !done)
      return fail(done.error());
  }
  if (options_.diff_previous) {
    if (auto previous = previous_.find(target); previous != previous_.end()) {
      emit::FlameTree tree;
      tree.add_profile(previous->second, false, emit::kBefore);
      tree.add_profile(profile, false, emit::kAfter);
      emit::SvgOptions diff_svg = options_.svg;
      diff_svg.title = emit::kDifferentialTitle;
      diff_svg.subtitle = target + " \xC2\xB7 " + base + " against the interval before";
      emit::DiffOptions diff;
      if (auto done =
              write(base + ".diff.svg", ".diff.svg",
                    [&](std::ostream& out) { return emit::write_svg(tree, diff_svg, out, &diff); });
          !done)
        return fail(done.error());
    }
    previous_[target] = profile;
  }
  written.removed = apply_retention(dir_fd, shown);
  return written;
}

size_t DumpWriter::apply_retention(int dir_fd, const std::string& shown)
{
  const auto& policy = options_.retention;
  if (!policy.max_age && !policy.max_count && !policy.max_bytes)
    return 0;
  size_t removed = 0;
  // Through the target directory's descriptor: nothing outside it is ever removed.
  for (const auto& dump : expired_dumps(list_dumps_at(dir_fd), policy, Clock::now())) {
    for (const auto& file : dump.files) {
      if (::unlinkat(dir_fd, file.c_str(), 0) != 0 && errno != ENOENT)
        spdlog::debug("cannot remove {}/{}: {}", shown, file, std::strerror(errno));
    }
    ++removed;
  }
  return removed;
}

bool DumpWriter::write_part(const std::string& target,
                            const profile::SymbolizedProfile& part,
                            const Interval& interval,
                            DumpReport& report)
{
  const std::string& directory = interval.directories.at(target);
  auto written = write_target(target, directory, part, interval.window, interval.coverage);
  if (!written && written.error().errno_value == kRefusedErrno) {
    // Not a passing failure: keeping the dump would only stop every other target's.
    // The message names the directory, whose name is safe to show, not the target.
    if (refused_.insert(directory).second)
      spdlog::error("{}; the dumps of that target are dropped until it is removed",
                    written.error().message);
    ++report.refused;
    return true;
  }
  if (!written) {
    if (report.error.empty())
      report.error = written.error().message;
    return false;
  }
  refused_.erase(directory);
  report.files += written->files;
  report.removed += written->removed;
  return true;
}

DumpReport DumpWriter::drain_pending(DumpReport report)
{
  while (!pending_.empty()) {
    Interval& interval = pending_.front();
    for (auto it = interval.targets.begin(); it != interval.targets.end();) {
      if (!write_part(it->first, it->second, interval, report)) {
        report.pending = pending_.size();
        return report;
      }
      it = interval.targets.erase(it);
    }
    pending_.pop_front();
  }
  report.pending = 0;
  return report;
}

DumpReport DumpWriter::write(const profile::SymbolizedProfile& interval,
                             const Window& window,
                             const std::vector<profile::TargetCoverage>& coverage)
{
  // Earlier intervals first: if their writes work again, nothing needs to give way.
  DumpReport report = drain_pending(DumpReport{});
  auto stacks = profile::stacks_by_target(interval);
  std::set<std::string> targets;
  for (const auto& [target, indexes] : stacks)
    targets.insert(target);
  Interval next{window, {}, profile::target_file_names(targets), coverage};
  report.targets = stacks.size();
  // One target's part is copied at a time and let go once written: a node's interval is never
  // held twice. Only what cannot be written yet is kept.
  for (const auto& [target, indexes] : stacks) {
    profile::SymbolizedProfile part = profile::target_part(interval, target, indexes);
    if (!report.error.empty() || !write_part(target, part, next, report))
      next.targets.emplace(target, std::move(part));
  }
  if (!next.targets.empty())
    pending_.push_back(std::move(next));
  while (pending_.size() > options_.max_pending) {
    spdlog::warn("dropping the dumps of {}: {} intervals could not be written",
                 window_name(pending_.front().window), pending_.size());
    pending_.pop_front();
    ++report.dropped;
  }
  report.pending = pending_.size();
  measure();
  return report;
}

DumpReport DumpWriter::flush()
{
  DumpReport report = drain_pending(DumpReport{});
  measure();
  return report;
}

void DumpWriter::measure_memory(std::shared_ptr<MemoryAccount> account)
{
  memory_ = MemoryCharge(std::move(account), MemoryKind::kDumps);
  measure();
}

void DumpWriter::measure()
{
  uint64_t bytes = 0;
  for (const auto& interval : pending_)
    for (const auto& [target, profile] : interval.targets)
      bytes += heap_bytes(target) + profile_bytes(profile);
  for (const auto& [target, profile] : previous_)
    bytes += heap_bytes(target) + profile_bytes(profile);
  (void)memory_.set(bytes); // measured: never refused
}

Result<> DumpWriter::append_stats(const std::string& line)
{
  return append_at(directory_.get(), kStatsFileName, line + "\n", kDumpFileMode,
                   options_.directory + "/" + kStatsFileName);
}

} // namespace flamebpf::dumps
