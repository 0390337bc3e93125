#include "jvm/agent_attacher.h"

#include <algorithm>
#include <cerrno>
#include <fmt/format.h>
#include <signal.h>

#include "common/log.h"
#include "common/procfs.h"
#include "jvm/agent_installer.h"
#include "jvm/frame_pointers.h"
#include "jvm/hotspot_attach.h"
#include "symbolize/proc_maps.h"

namespace flamebpf::jvm {
namespace {

// A JVM still starting is tried again after 100 ms, then at doubling gaps of at most 1 s: most
// JVMs handle SIGQUIT within a second of their launch, and until the agent is loaded their JIT
// frames go unnamed; a throttled one may take much longer, and costs a status read a second.
constexpr std::chrono::milliseconds kFirstRetry{100};
constexpr std::chrono::milliseconds kLongestRetry{1000};

bool exited(uint32_t pid)
{
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

// Whether the process has loaded an agent that keeps its perf map current: a JVM started with
// -agentpath loads it while it starts.
bool loads_perf_map_agent(uint32_t pid, const std::string& proc_root)
{
  auto maps = procfs::read_file(proc_root + "/" + std::to_string(pid) + "/maps");
  return maps && symbolize::jvm_traits(symbolize::parse_proc_maps(*maps)).keeps_perf_map;
}

} // namespace

AgentAttacher::AgentAttacher(std::span<const unsigned char> agent_library, AttacherOptions options)
    : library_(agent_library), options_(std::move(options)), worker_([this] { run(); })
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
  worker_.join();
}

void AgentAttacher::on_jvm(uint32_t host_pid,
                           uint32_t image_id,
                           bool keeps_perf_map,
                           const std::string& where)
{
  {
    std::lock_guard lock(mutex_);
    if (stopping_ || !seen_.insert(image_key(host_pid, image_id)).second)
      return;
    Request request;
    request.pid = host_pid;
    request.image_id = image_id;
    request.keeps_perf_map = keeps_perf_map;
    request.where = where;
    request.handed_in = Clock::now();
    queue_.push_back(std::move(request));
  }
  wake_.notify_one();
}

void AgentAttacher::forget(uint32_t host_pid, uint32_t image_id)
{
  std::lock_guard lock(mutex_);
  if (seen_.erase(image_key(host_pid, image_id)) == 0)
    return;
  auto same_image = [&](const Request& request) {
    return request.pid == host_pid && request.image_id == image_id;
  };
  std::erase_if(starting_, same_image);
  std::erase_if(queue_, same_image);
  if (queue_.empty() && !busy_)
    idle_.notify_all();
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
    // Forgotten meanwhile (the process is gone): not tried again.
    if (outcome == Outcome::kStillStarting &&
        seen_.contains(image_key(request.pid, request.image_id))) {
      ++put_off_;
      starting_.push_back(std::move(request));
    }
    if (queue_.empty())
      idle_.notify_all();
  }
}

AgentAttacher::Outcome AgentAttacher::handle(Request& request)
{
  bool attached = false;
  if (options_.attach && !request.keeps_perf_map) {
    auto target = attach_target_of(request.pid, options_.proc_root);
    if (!target && exited(request.pid)) {
      // A short-lived JVM (a health check's java -version) is no failure of flamebpf's.
      spdlog::debug("JVM {} ({}) exited before it could be attached", request.pid, request.where);
      return Outcome::kHandled;
    }
    if (request.put_off > 0)
      request.keeps_perf_map = loads_perf_map_agent(request.pid, options_.proc_root);
    bool patient = Clock::now() - request.handed_in < options_.starting_patience;
    if (target && !target->catches_sigquit && !request.keeps_perf_map && patient) {
      auto wait = std::min(kFirstRetry * (1 << std::min(request.put_off, 6)), kLongestRetry);
      if (request.put_off == 0)
        spdlog::debug("JVM {} ({}) is still starting (it does not handle SIGQUIT yet); attach is "
                      "retried for up to {} s",
                      request.pid, request.where, options_.starting_patience.count() / 1000.0);
      ++request.put_off;
      request.due = Clock::now() + wait;
      return Outcome::kStillStarting;
    }
    if (!request.keeps_perf_map)
      attached = attach(request, target);
  }
  check_frame_pointers(request, attached);
  return Outcome::kHandled;
}

bool AgentAttacher::attach(const Request& request, const Result<AttachTarget>& target)
{
  auto started = Clock::now();
  auto loaded = [&]() -> Result<std::string> {
    if (!target)
      return fail(target.error());
    // Named by a hash of the library's bytes, computed on the first attach rather than before
    // sampling starts.
    if (file_name_.empty())
      file_name_ = agent_file_name(library_);
    auto path = install_agent(*target, library_, file_name_);
    if (!path)
      return fail(path.error());
    if (auto ok = load_agent(*target, *path, "", options_.timeout); !ok)
      return fail(ok.error());
    return *path;
  }();
  std::chrono::duration<double> took = Clock::now() - started;
  std::lock_guard lock(mutex_);
  if (!loaded) {
    ++failed_;
    spdlog::warn("JVM {} ({}): cannot load flamebpf's agent, so its JIT-compiled frames stay "
                 "unnamed: {}",
                 request.pid, request.where, loaded.error().message);
    return false;
  }
  ++attached_;
  spdlog::info("JVM {} ({}): loaded flamebpf's agent from {} in {:.3f} s", request.pid,
               request.where, *loaded, took.count());
  return true;
}

void AgentAttacher::check_frame_pointers(const Request& request, bool attached)
{
  std::optional<bool> preserved;
  bool known = false;
  if (attached || (options_.attach && request.keeps_perf_map)) {
    // The JVM's own view counts every way a flag can be set (argument files, environment).
    if (auto target = attach_target_of(request.pid, options_.proc_root)) {
      if (auto flags = jcmd(*target, "VM.flags", options_.timeout)) {
        preserved = frame_pointers_in_vm_flags(*flags);
        known = true;
      }
    }
  }
  if (!known) {
    std::string process = options_.proc_root + "/" + std::to_string(request.pid);
    auto cmdline = procfs::read_file(process + "/cmdline", 1 << 20);
    auto environ = procfs::read_file(process + "/environ", 1 << 20);
    if (!cmdline || cmdline->empty())
      return; // gone already (an exited process that is not yet reaped has an empty cmdline)
    preserved = frame_pointers_in_command_line(*cmdline, environ ? *environ : "");
  }
  if (!preserved.value_or(false))
    spdlog::warn("JVM {} ({}) runs without {}: its Java stacks stop at the first JIT-compiled "
                 "frame; add {} to its java command line or JAVA_TOOL_OPTIONS",
                 request.pid, request.where, kFramePointerFlag, kFramePointerFlag);
}

} // namespace flamebpf::jvm
