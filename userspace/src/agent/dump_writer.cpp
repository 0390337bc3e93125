#include "agent/dump_writer.h"

#include <cerrno>
#include <cstdio>
#include <dirent.h>
#include <filesystem>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

#include "common/atomic_file.h"
#include "common/log.h"
#include "emit/flame_tree.h"
#include "emit/svg.h"
#include "profile/by_target.h"

namespace flamebpf::agent {
DumpWriter::DumpWriter(DumpOptions options) : options_(std::move(options))
{
  clean_stale_temporaries();
}

void DumpWriter::clean_stale_temporaries()
{
  // One agent writes a directory: a temporary file there is a killed run's, never a reader's.
  std::error_code ignored;
  for (const auto& target : std::filesystem::directory_iterator(options_.directory, ignored)) {
    if (!target.is_directory(ignored) || target.is_symlink(ignored))
      continue;
    for (const auto& file : std::filesystem::directory_iterator(target.path(), ignored)) {
      if (file.path().filename().string().find(".tmp.") != std::string::npos)
        std::filesystem::remove(file.path(), ignored);
    }
  }
}

Result<> DumpWriter::write_latest_link(const std::string& directory,
                                       const std::string& file,
                                       std::string_view extension)
{
  // A relative link, replaced by a rename: readers find either the old newest or the new one.
  std::string link = directory + "/latest" + std::string(extension);
  std::string temporary = link + ".tmp." + std::to_string(::getpid());
  ::unlink(temporary.c_str());
  if (::symlink(file.c_str(), temporary.c_str()) != 0)
    return fail(system_error(errno, "cannot link " + link));
  if (::rename(temporary.c_str(), link.c_str()) != 0) {
    int saved = errno;
    ::unlink(temporary.c_str());
    return fail(system_error(saved, "cannot link " + link));
  }
  return {};
}

Result<size_t> DumpWriter::write_target(const std::string& target,
                                        const std::string& directory_name,
                                        const profile::SymbolizedProfile& profile,
                                        const Window& window)
{
  std::string directory = options_.directory + "/" + directory_name;
  if (::mkdir(directory.c_str(), 0755) != 0 && errno != EEXIST)
    return fail(system_error(errno, "cannot create " + directory));
  std::string base = window_name(window);
  emit::SvgOptions svg = options_.svg;
  svg.subtitle = emit::describe_profile(profile);
  size_t files = 0;
  for (emit::Format format : options_.formats) {
    std::string file = base + std::string(emit::extension(format));
    auto emitter = emit::make_emitter(format, svg);
    auto written = write_file_atomically(
        directory + "/" + file, [&](std::ostream& out) { return emitter->write(profile, out); });
    if (!written)
      return fail(written.error());
    ++files;
    if (auto linked = write_latest_link(directory, file, emit::extension(format)); !linked)
      return fail(linked.error());
  }
  if (options_.diff_previous) {
    if (auto previous = previous_.find(target); previous != previous_.end()) {
      emit::FlameTree tree;
      tree.add_profile(previous->second, false, emit::kBefore);
      tree.add_profile(profile, false, emit::kAfter);
      emit::SvgOptions diff_svg = options_.svg;
      diff_svg.title = "Differential Flame Graph";
      diff_svg.subtitle = target + " \xC2\xB7 " + base + " against the interval before";
      emit::DiffOptions diff;
      std::string file = base + ".diff.svg";
      auto written = write_file_atomically(directory + "/" + file, [&](std::ostream& out) {
        return emit::write_svg(tree, diff_svg, out, &diff);
      });
      if (!written)
        return fail(written.error());
      ++files;
      if (auto linked = write_latest_link(directory, file, ".diff.svg"); !linked)
        return fail(linked.error());
    }
    previous_[target] = profile;
  }
  return files;
}

size_t DumpWriter::apply_retention(const std::string& directory)
{
  const auto& policy = options_.retention;
  if (!policy.max_age && !policy.max_count && !policy.max_bytes)
    return 0;
  size_t removed = 0;
  for (const auto& dump : expired_dumps(list_dumps(directory), policy, Clock::now())) {
    for (const auto& file : dump.files)
      ::unlink((directory + "/" + file).c_str());
    ++removed;
  }
  return removed;
}

DumpReport DumpWriter::drain_pending(DumpReport report)
{
  while (!pending_.empty()) {
    Interval& interval = pending_.front();
    for (auto it = interval.targets.begin(); it != interval.targets.end();) {
      const std::string& directory = interval.directories.at(it->first);
      auto written = write_target(it->first, directory, it->second, interval.window);
      if (!written) {
        if (report.error.empty())
          report.error = written.error().message;
        report.pending = pending_.size();
        return report;
      }
      report.files += *written;
      report.removed += apply_retention(options_.directory + "/" + directory);
      it = interval.targets.erase(it);
    }
    pending_.pop_front();
  }
  report.pending = 0;
  return report;
}

DumpReport DumpWriter::write(const profile::SymbolizedProfile& interval, const Window& window)
{
  // Earlier intervals first: if their writes work again, nothing needs to give way.
  DumpReport report = drain_pending(DumpReport{});
  Interval next{window, profile::split_by_target(interval), {}};
  std::set<std::string> targets;
  for (const auto& [target, part] : next.targets)
    targets.insert(target);
  next.directories = profile::target_file_names(targets);
  report.targets = next.targets.size();
  if (!next.targets.empty())
    pending_.push_back(std::move(next));
  while (pending_.size() > options_.max_pending) {
    spdlog::warn("dropping the dumps of {}: {} intervals could not be written",
                 window_name(pending_.front().window), pending_.size());
    pending_.pop_front();
    ++report.dropped;
  }
  if (!report.error.empty()) {
    report.pending = pending_.size();
    return report;
  }
  return drain_pending(std::move(report));
}

DumpReport DumpWriter::flush()
{
  return drain_pending(DumpReport{});
}

} // namespace flamebpf::agent
