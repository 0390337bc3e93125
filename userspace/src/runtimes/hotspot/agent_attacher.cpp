#include "runtimes/hotspot/agent_attacher.h"

#include <algorithm>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include "common/capabilities.h"
#include "common/contained_file.h"
#include "common/log.h"
#include "common/proc_maps.h"
#include "common/procfs.h"
#include "runtimes/hotspot/agent_installer.h"
#include "runtimes/hotspot/hotspot_attach.h"
#include "runtimes/hotspot/jvm_flags.h"
#include "runtimes/hotspot/jvm_traits.h"

namespace flamebpf::hotspot {
namespace {

// A JVM still starting is tried again after 100 ms, then at doubling gaps of at most 1 s: most
// JVMs handle SIGQUIT within a second of their launch, and until the agent is loaded their JIT
// frames go unnamed; a throttled one may take much longer, and costs a few /proc reads a second.
constexpr std::chrono::milliseconds kFirstRetry{100};
constexpr std::chrono::milliseconds kLongestRetry{1000};
// A JVM that exits this soon after refusing the load was shutting down (javac, a health check's
// java -version): HotSpot refuses agents then, and that is no failure worth a warning.
constexpr std::chrono::milliseconds kExitGrace{500};
// What becomes of the JIT frames of a JVM that nothing inside names (symbolize/hotspot_code.h).
constexpr std::string_view kReadFromOutside =
    "its JIT-compiled frames are named from outside it, by reading its code cache, without the "
    "methods inlined into them";

// A file of the process, e.g. "maps": through its directory when the target could be opened (so
// that it is of the process checked, and no other), else by its pid; nullopt if unreadable.
std::optional<std::string> process_file(const Result<AttachTarget>& target,
                                        uint32_t pid,
                                        const std::string& proc_root,
                                        const std::string& name,
                                        size_t max_bytes)
{
  auto text =
      target ? read_process_file(*target, name, max_bytes)
             : procfs::read_file(proc_root + "/" + std::to_string(pid) + "/" + name, max_bytes);
  if (!text)
    return std::nullopt;
  return std::move(*text);
}

// What the process's maps say now: it may have exec'd another program since it was found.
JvmTraits traits_now(const Result<AttachTarget>& target, uint32_t pid, const std::string& proc_root)
{
  auto maps = process_file(target, pid, proc_root, "maps", 64 << 20);
  return maps ? jvm_traits(procfs::parse_proc_maps(*maps)) : JvmTraits{};
}

// The process's command line and environment (NUL-separated); nullopt once it is gone (an exited
// process that is not yet reaped has an empty cmdline).
struct CommandLine {
  std::string cmdline;
  std::string environ;
};
std::optional<CommandLine>
command_line_of(const Result<AttachTarget>& target, uint32_t pid, const std::string& proc_root)
{
  auto cmdline = process_file(target, pid, proc_root, "cmdline", 1 << 20);
  if (!cmdline || cmdline->empty())
    return std::nullopt;
  auto environ = process_file(target, pid, proc_root, "environ", 1 << 20);
  return CommandLine{std::move(*cmdline), environ ? std::move(*environ) : std::string()};
}

bool started_with_reduced_signals(const Result<AttachTarget>& target,
                                  uint32_t pid,
                                  const std::string& proc_root)
{
  auto command_line = command_line_of(target, pid, proc_root);
  return command_line &&
         reduced_signals_in_command_line(command_line->cmdline, command_line->environ);
}

// Who holds the JVM's perf map name, /tmp/perf-<ns_pid>.map in its root, if not the JVM's user:
// the agent writes only a map of its own and cannot replace another user's file in a sticky
// /tmp. Looked at without opening it.
std::optional<uint32_t> foreign_perf_map_owner(const AttachTarget& target)
{
  auto root_fd = open_root(target);
  if (!root_fd)
    return std::nullopt;
  auto tmp_fd = open_directory_at(root_fd->get(), "/tmp", kResolveInRoot, "/tmp");
  if (!tmp_fd)
    return std::nullopt;
  std::string name = "perf-" + std::to_string(target.ns_pid) + ".map";
  struct stat status {};
  if (::fstatat(tmp_fd->get(), name.c_str(), &status, AT_SYMLINK_NOFOLLOW) != 0 ||
      status.st_uid == target.uid)
    return std::nullopt;
  return status.st_uid;
}

// Has HotSpot write its perf map, /tmp/perf-<ns_pid>.map in its root. HotSpot only warns on its
// own output when it cannot create the file, so the command's success is not enough: the map must
// be there afterwards, the JVM's user's (or root's), and written since the command was sent.
Result<> write_perf_map(const AttachTarget& target, std::chrono::milliseconds timeout)
{
  // A coarse file-system clock may stamp the file a tick before the system clock's now.
  auto sent = std::chrono::system_clock::now() - std::chrono::milliseconds(100);
  if (auto done = jcmd(target, "Compiler.perfmap", timeout); !done)
    return fail(error("jcmd Compiler.perfmap: " + done.error().message));
  std::string path = "/tmp/perf-" + std::to_string(target.ns_pid) + ".map";
  std::string shown = target.process_path + "/root" + path;
  auto root_fd = open_root(target);
  if (!root_fd)
    return fail(root_fd.error());
  auto map = open_regular_at(root_fd->get(), path, kResolveInRoot, shown);
  if (!map)
    return fail(error("jcmd Compiler.perfmap wrote no map: " + map.error().message));
  struct stat status {};
  if (::fstat(map->get(), &status) != 0)
    return fail(system_error(errno, "cannot stat " + shown));
  auto modified = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::seconds(status.st_mtim.tv_sec) +
          std::chrono::nanoseconds(status.st_mtim.tv_nsec)));
  if (modified < sent)
    return fail(error("jcmd Compiler.perfmap did not write " + shown + " (see the JVM's output)"));
  if (status.st_uid != target.uid && status.st_uid != 0)
    return fail(
        error(shown + " is held by uid " + std::to_string(status.st_uid) + ", not the JVM's user"));
  return {};
}

} // namespace

AgentAttacher::AgentAttacher(std::span<const unsigned char> agent_library, AttacherOptions options)
    : library_(agent_library), options_(std::move(options)),
      worker_(
          caps::start_thread(caps::Role::kRuntimeAttacher, "flamebpf-attach", [this] { run(); }))
{
}

AgentAttacher::~AgentAttacher()
{
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    queue_.clear();
    starting_.clear();
  }
  wake_.notify_all();
  if (worker_.joinable())
    worker_.join();
}

bool AgentAttacher::stop(Clock::time_point deadline)
{
  std::unique_lock lock(mutex_);
  stopping_ = true;
  queue_.clear();
  starting_.clear();
  wake_.notify_all();
  if (!idle_.wait_until(lock, deadline, [this] { return finished_; }))
    return false;
  lock.unlock();
  if (worker_.joinable())
    worker_.join();
  return true;
}

void AgentAttacher::on_jvm(uint32_t host_pid, bool keeps_perf_map, const std::string& where)
{
  if (host_pid == static_cast<uint32_t>(::getpid()))
    return; // flamebpf, sampling the whole host, is never a JVM to attach to
  auto start_time = procfs::live_start_time(host_pid, options_.proc_root);
  if (!start_time)
    return; // gone already
  {
    std::lock_guard lock(mutex_);
    if (stopping_)
      return;
    auto [it, added] = seen_.try_emplace(host_pid, *start_time);
    if (!added) {
      if (it->second == *start_time)
        return;
      it->second = *start_time; // a new process with a reused pid; the old one's requests lapse
    }
    Request request;
    request.pid = host_pid;
    request.start_time = *start_time;
    request.keeps_perf_map = keeps_perf_map;
    request.where = where;
    request.handed_in = Clock::now();
    queue_.push_back(std::move(request));
  }
  wake_.notify_one();
}

void AgentAttacher::forget_if_gone(uint32_t host_pid)
{
  {
    std::lock_guard lock(mutex_);
    if (!seen_.contains(host_pid))
      return; // not a JVM: most processes
  }
  auto start_time = procfs::live_start_time(host_pid, options_.proc_root);
  std::lock_guard lock(mutex_);
  auto it = seen_.find(host_pid);
  if (it == seen_.end() || start_time == it->second)
    return;
  seen_.erase(it);
  map_command_jvms_.erase(host_pid);
  auto of_pid = [&](const Request& request) { return request.pid == host_pid; };
  std::erase_if(starting_, of_pid);
  std::erase_if(queue_, of_pid);
  if (queue_.empty() && !busy_)
    idle_.notify_all();
}

void AgentAttacher::perf_map_lacks_code(uint32_t host_pid)
{
  {
    std::lock_guard lock(mutex_);
    auto it = map_command_jvms_.find(host_pid);
    if (stopping_ || it == map_command_jvms_.end() || it->second.queued ||
        Clock::now() < it->second.next_write)
      return;
    it->second.queued = true;
    Request request;
    request.pid = host_pid;
    request.start_time = it->second.start_time;
    request.where = it->second.where;
    request.handed_in = Clock::now();
    request.rewrite_map = true;
    queue_.push_back(std::move(request));
  }
  wake_.notify_one();
}

std::vector<uint32_t> AgentAttacher::take_rewritten_perf_maps()
{
  std::lock_guard lock(mutex_);
  return std::exchange(rewritten_, {});
}

void AgentAttacher::wait_idle(std::chrono::steady_clock::time_point deadline)
{
  std::unique_lock lock(mutex_);
  idle_.wait_until(lock, deadline, [this] { return queue_.empty() && !busy_; });
}

uint64_t AgentAttacher::attached() const
{
  std::lock_guard lock(mutex_);
  return attached_;
}

uint64_t AgentAttacher::named_by_map_command() const
{
  std::lock_guard lock(mutex_);
  return named_by_map_command_;
}

uint64_t AgentAttacher::failed() const
{
  std::lock_guard lock(mutex_);
  return failed_;
}

size_t AgentAttacher::pending() const
{
  std::lock_guard lock(mutex_);
  return queue_.size() + starting_.size() + (busy_ ? 1 : 0);
}

uint64_t AgentAttacher::put_off() const
{
  std::lock_guard lock(mutex_);
  return put_off_;
}

void AgentAttacher::run()
{
  std::unique_lock lock(mutex_);
  // Whichever way the loop ends, stop() learns it.
  struct Finish {
    AgentAttacher& attacher;
    ~Finish()
    {
      attacher.finished_ = true;
      attacher.idle_.notify_all();
    }
  } finish{*this};
  for (;;) {
    auto earliest =
        std::min_element(starting_.begin(), starting_.end(),
                         [](const Request& a, const Request& b) { return a.due < b.due; });
    auto due = earliest == starting_.end() ? Clock::time_point() : earliest->due;
    auto ready = [&] {
      return stopping_ || !queue_.empty() || (!starting_.empty() && Clock::now() >= due);
    };
    if (starting_.empty())
      wake_.wait(lock, ready);
    else
      wake_.wait_until(lock, due, ready);
    if (stopping_)
      return;
    auto now = Clock::now();
    for (auto it = starting_.begin(); it != starting_.end();) {
      if (it->due <= now) {
        queue_.push_back(std::move(*it));
        it = starting_.erase(it);
      } else {
        ++it;
      }
    }
    if (queue_.empty())
      continue;
    Request request = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    Outcome outcome = handle(request);
    lock.lock();
    busy_ = false;
    // Not tried again if the process was forgotten meanwhile, or its pid is another's now.
    auto seen = seen_.find(request.pid);
    bool current = seen != seen_.end() && seen->second == request.start_time;
    if (outcome == Outcome::kStillStarting && current) {
      ++put_off_;
      starting_.push_back(std::move(request));
    }
    if (queue_.empty())
      idle_.notify_all();
  }
}

AgentAttacher::Outcome AgentAttacher::handle(Request& request)
{
  if (request.rewrite_map) {
    rewrite_perf_map(request);
    return Outcome::kHandled;
  }
  // The process's directory is opened first, and everything after goes through it: the process
  // whose start time is checked here is the one read, signalled and attached, even if it exits
  // and its pid passes to another meanwhile.
  auto target = attach_target_of(request.pid, options_.proc_root);
  auto start_time =
      target ? target->start_time : procfs::live_start_time(request.pid, options_.proc_root);
  // Each try, the first included, makes sure the pid still names that JVM: a process that exited
  // (its pid maybe reused) or exec'd something else must not get a trigger file or a SIGQUIT.
  if (start_time != request.start_time) {
    // A short-lived JVM (a health check's java -version) is no failure of flamebpf's.
    spdlog::debug("JVM {} ({}) exited before it could be attached", request.pid, request.where);
    return Outcome::kHandled;
  }
  auto traits = traits_now(target, request.pid, options_.proc_root);
  if (!traits.hotspot) {
    spdlog::debug("process {} ({}) is no longer a JVM", request.pid, request.where);
    return Outcome::kHandled;
  }
  // A JVM started with -agentpath loads that agent while it starts.
  request.keeps_perf_map |= traits.keeps_perf_map;
  Attach attached = Attach::kNotTried;
  if (options_.attach && !request.keeps_perf_map) {
    bool starting = target && !target->catches_sigquit;
    if (starting && started_with_reduced_signals(target, request.pid, options_.proc_root)) {
      // It will never handle SIGQUIT: said now rather than after the patience.
      std::lock_guard lock(mutex_);
      ++failed_;
      spdlog::warn("JVM {} ({}) runs with {}, so it never starts its attach listener; {}; for "
                   "those, load flamebpf's agent at its start (-agentpath) or drop {}",
                   request.pid, request.where, kReducedSignalsFlag, kReadFromOutside,
                   kReducedSignalsFlag);
      attached = Attach::kFailed;
    } else if (starting && Clock::now() - request.handed_in < options_.starting_patience) {
      auto wait = std::min(kFirstRetry * (1 << std::min(request.put_off, 6)), kLongestRetry);
      if (request.put_off == 0)
        spdlog::debug("JVM {} ({}) is still starting (it does not handle SIGQUIT yet); attach is "
                      "retried for up to {} s",
                      request.pid, request.where, options_.starting_patience.count() / 1000.0);
      ++request.put_off;
      request.due = Clock::now() + wait;
      return Outcome::kStillStarting;
    } else {
      attached = attach(request, target);
    }
  }
  if (attached != Attach::kExited)
    check_frame_pointers(request, target,
                         attached == Attach::kLoaded || attached == Attach::kMapCommand);
  return Outcome::kHandled;
}

AgentAttacher::Attach AgentAttacher::attach(const Request& request,
                                            const Result<AttachTarget>& target)
{
  auto started = Clock::now();
  // Where the agent has no place, HotSpot may still name its code; where the attach itself
  // failed, asking HotSpot for its map would fail (or time out) the same way.
  bool no_place = false;
  auto loaded = [&]() -> Result<InstalledAgent> {
    if (!target)
      return fail(target.error());
    // Named by a hash of the library's bytes, computed on the first attach rather than before
    // sampling starts.
    if (file_name_.empty())
      file_name_ = agent_file_name(library_);
    auto installed = install_agent(*target, library_, file_name_);
    if (!installed) {
      no_place = true;
      return fail(installed.error());
    }
    auto ok = load_agent(*target, installed->path, "", options_.timeout);
    remove_agent(*target, *installed);
    if (!ok) {
      Error failure = ok.error();
      if (auto owner = foreign_perf_map_owner(*target))
        failure.message += "; /tmp/perf-" + std::to_string(target->ns_pid) +
                           ".map in its root is held by uid " + std::to_string(*owner) +
                           ", which the agent does not write to and the JVM's user cannot replace";
      return fail(failure);
    }
    return installed;
  }();
  std::chrono::duration<double> took = Clock::now() - started;
  if (!loaded && exits_within(request, kExitGrace)) {
    spdlog::debug("JVM {} ({}) exited while it was attached: {}", request.pid, request.where,
                  loaded.error().message);
    return Attach::kExited;
  }
  if (!loaded && no_place) {
    // HotSpot can name its code itself, on request: its map needs a writable /tmp, not an
    // exec-able one.
    auto map_started = Clock::now();
    auto written = write_perf_map(*target, options_.timeout);
    if (written) {
      map_written(request, Clock::now() - map_started, true);
      std::lock_guard lock(mutex_);
      ++named_by_map_command_;
      spdlog::info("JVM {} ({}): flamebpf's agent cannot load ({}); its JIT-compiled frames are "
                   "named by the perf map HotSpot writes on request (jcmd Compiler.perfmap), "
                   "written again whenever samples meet code it lacks",
                   request.pid, request.where, loaded.error().message);
      return Attach::kMapCommand;
    }
    std::lock_guard lock(mutex_);
    ++failed_;
    spdlog::warn("JVM {} ({}): cannot load flamebpf's agent: {}; nor can HotSpot write its perf "
                 "map: {}; {}",
                 request.pid, request.where, loaded.error().message, written.error().message,
                 kReadFromOutside);
    return Attach::kFailed;
  }
  std::lock_guard lock(mutex_);
  if (!loaded) {
    ++failed_;
    spdlog::warn("JVM {} ({}): cannot load flamebpf's agent: {}; {}", request.pid, request.where,
                 loaded.error().message, kReadFromOutside);
    return Attach::kFailed;
  }
  ++attached_;
  spdlog::info("JVM {} ({}): loaded flamebpf's agent from {} in {:.3f} s{}", request.pid,
               request.where, loaded->path, took.count(),
               loaded->usual_name_taken.empty()
                   ? ""
                   : " (its usual name is taken: " + loaded->usual_name_taken + ")");
  return Attach::kLoaded;
}

void AgentAttacher::rewrite_perf_map(const Request& request)
{
  auto started = Clock::now();
  auto target = attach_target_of(request.pid, options_.proc_root);
  Result<> written = fail(error("it exited"));
  if (target && target->start_time == request.start_time)
    written = write_perf_map(*target, options_.timeout);
  else if (!target)
    written = fail(target.error());
  // A failed write is paced as a written one would be.
  map_written(request, Clock::now() - started, written.has_value());
  if (!written)
    spdlog::debug("JVM {} ({}): its perf map is not written again: {}", request.pid, request.where,
                  written.error().message);
}

void AgentAttacher::map_written(const Request& request, Clock::duration took, bool written)
{
  std::lock_guard lock(mutex_);
  auto seen = seen_.find(request.pid);
  if (seen == seen_.end() || seen->second != request.start_time)
    return; // forgotten meanwhile, or its pid is another process's now
  auto& jvm = map_command_jvms_[request.pid];
  jvm.start_time = request.start_time;
  jvm.where = request.where;
  jvm.queued = false;
  jvm.next_write =
      Clock::now() + std::max<Clock::duration>(kMinMapRewriteGap, took * kMapRewriteCost);
  if (written)
    rewritten_.push_back(request.pid);
}

bool AgentAttacher::exits_within(const Request& request, std::chrono::milliseconds grace) const
{
  auto deadline = Clock::now() + grace;
  for (;;) {
    if (procfs::live_start_time(request.pid, options_.proc_root) != request.start_time)
      return true;
    if (Clock::now() >= deadline)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void AgentAttacher::check_frame_pointers(const Request& request,
                                         const Result<AttachTarget>& target,
                                         bool attached)
{
  if (unwinds_by_agent_records_ && target && target->ns_pid != 0 &&
      open_contained(options_.proc_root + "/" + std::to_string(request.pid) + "/root",
                     "/tmp/flamebpf-" + std::to_string(target->ns_pid) + ".unwind")) {
    spdlog::debug("JVM {} ({}): its agent records its frames; frame pointers are not needed",
                  request.pid, request.where);
    return;
  }
  std::optional<bool> preserved;
  bool known = false;
  if (target && (attached || (options_.attach && request.keeps_perf_map))) {
    // The JVM's own view counts every way a flag can be set (argument files, environment).
    if (auto flags = jcmd(*target, "VM.flags", options_.timeout)) {
      preserved = frame_pointers_in_vm_flags(*flags);
      known = true;
    }
  }
  if (!known) {
    auto command_line = command_line_of(target, request.pid, options_.proc_root);
    if (!command_line)
      return; // gone already
    preserved = frame_pointers_in_command_line(command_line->cmdline, command_line->environ);
  }
  if (!preserved.value_or(false))
    spdlog::warn("JVM {} ({}) runs without {}: its Java stacks stop at the first JIT-compiled "
                 "frame; add {} to its java command line or JAVA_TOOL_OPTIONS",
                 request.pid, request.where, kFramePointerFlag, kFramePointerFlag);
}

} // namespace flamebpf::hotspot
