#include "pipeline/top_sink.h"

#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/log.h"
#include "emit/formats.h"
#include "pipeline/outputs.h"
#include "profile/drop_report.h"

namespace flamebpf::pipeline {
namespace {

// Rows of each --batch snapshot.
constexpr size_t kBatchRows = 30;
// What the log may hold while the screen is up; beyond that, lines are lost (and said to be).
constexpr off_t kMaxHeldLog = 4 << 20;

double cpu_seconds()
{
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& time) { return time.tv_sec + time.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

std::vector<std::string> names_of(const std::vector<target::Target>& targets)
{
  std::vector<std::string> names;
  for (const auto& target : targets)
    names.push_back(target.name.empty() ? "host" : target.name);
  return names;
}

} // namespace

bool TopSink::uses_the_screen(const cli::Config& config)
{
  const char* term = std::getenv("TERM");
  return !config.batch && ::isatty(STDOUT_FILENO) == 1 && term && *term &&
         std::string_view(term) != "dumb";
}

TopSink::TopSink(const cli::Config& config) : config_(config)
{
  last_cpu_wall_ = std::chrono::steady_clock::now();
  last_cpu_seconds_ = cpu_seconds();
  if (!uses_the_screen(config))
    return;
  top::TopScreen::Callbacks callbacks;
  callbacks.save = [this](const profile::SymbolizedProfile& profile) { return save(profile); };
  callbacks.quit = [] { ::kill(::getpid(), SIGINT); };
  screen_ = std::make_unique<top::TopScreen>(std::move(callbacks));
}

TopSink::~TopSink()
{
  screen_.reset();
  release_the_log();
}

std::optional<std::chrono::nanoseconds> TopSink::interval() const
{
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(config_.interval_seconds));
}

void TopSink::targets_added(const std::vector<target::Target>& added)
{
  summary_.targets += added.size();
  if (screen_)
    screen_->targets_changed({}, names_of(added));
  else
    for (const auto& name : names_of(added))
      model_.target_started(name);
}

void TopSink::targets_removed(const std::vector<target::Target>& removed)
{
  if (screen_)
    screen_->targets_changed(names_of(removed), {});
  else
    for (const auto& name : names_of(removed))
      model_.target_stopped(name);
}

void TopSink::started()
{
  if (!screen_)
    return;
  // The log would draw over the screen: it is held until the screen is gone.
  log_fd_ = ::memfd_create("flamebpf-log", MFD_CLOEXEC);
  saved_stderr_ = ::dup(STDERR_FILENO);
  if (log_fd_ >= 0 && saved_stderr_ >= 0)
    ::dup2(log_fd_, STDERR_FILENO);
  screen_->start();
}

void TopSink::release_the_log()
{
  if (saved_stderr_ < 0)
    return;
  ::dup2(saved_stderr_, STDERR_FILENO);
  ::close(saved_stderr_);
  saved_stderr_ = -1;
  if (log_fd_ < 0)
    return;
  off_t size = ::lseek(log_fd_, 0, SEEK_END);
  off_t from = size > kMaxHeldLog ? size - kMaxHeldLog : 0;
  if (from > 0)
    spdlog::warn("the log of the run held {} bytes; the last {} follow", size, kMaxHeldLog);
  std::string buffer(64 << 10, '\0');
  for (off_t at = from; at < size;) {
    ssize_t got = ::pread(log_fd_, buffer.data(), buffer.size(), at);
    if (got <= 0)
      break;
    if (::write(STDERR_FILENO, buffer.data(), static_cast<size_t>(got)) < 0)
      break;
    at += got;
  }
  ::close(log_fd_);
  log_fd_ = -1;
}

double TopSink::own_cpu_percent()
{
  auto now = std::chrono::steady_clock::now();
  double cpu = cpu_seconds();
  double wall = std::chrono::duration<double>(now - last_cpu_wall_).count();
  double percent = wall > 0 ? 100 * (cpu - last_cpu_seconds_) / wall : 0;
  last_cpu_wall_ = now;
  last_cpu_seconds_ = cpu;
  return percent;
}

Result<> TopSink::consume(const profile::SymbolizedProfile& interval, IntervalFacts& facts)
{
  summary_.samples += interval.total_samples();
  summary_.drops += profile::total_drops(interval.counters);
  double cpu = own_cpu_percent();
  std::string coverage = profile::coverage_summary(facts.coverage);
  if (screen_) {
    screen_->add(interval, cpu, std::move(coverage));
    return {};
  }
  auto compact = top::compact_interval(interval, model_.names());
  compact.own_cpu_percent = cpu;
  compact.coverage = std::move(coverage);
  model_.add(std::move(compact));
  std::string text =
      top::batch_snapshot(model_, top::TopWindow::kInterval, top::TopOrder::kSelf, kBatchRows);
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)
    return fail(error("cannot write to standard output"));
  return {};
}

std::string TopSink::save(const profile::SymbolizedProfile& profile)
{
  auto now = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
  std::string base = fmt::format("flamebpf-top-{:%Y%m%dT%H%M%S}Z", now);
  emit::SvgOptions graph = config_.graph;
  graph.subtitle = fmt::format("flamebpf top, {} samples", profile.total_samples());
  for (const char* extension : {".folded", ".svg"}) {
    if (auto written = write_profile(base + extension, profile, graph); !written)
      return "not saved: " + written.error().message;
  }
  return "saved " + base + ".folded and " + base + ".svg";
}

Result<> TopSink::finish(RecordSummary& summary)
{
  screen_.reset();
  release_the_log();
  summary = summary_;
  return {};
}

} // namespace flamebpf::pipeline
