#include "jvm/agent_attacher.h"

#include <fmt/format.h>

#include "common/log.h"
#include "common/procfs.h"
#include "jvm/agent_installer.h"
#include "jvm/frame_pointers.h"
#include "jvm/hotspot_attach.h"

namespace flamebpf::jvm {

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
  }
  wake_.notify_all();
  worker_.join();
}

void AgentAttacher::on_jvm(uint32_t host_pid, bool keeps_perf_map, const std::string& where)
{
  {
    std::lock_guard lock(mutex_);
    if (stopping_ || !seen_.insert(host_pid).second)
      return;
    queue_.push_back({host_pid, keeps_perf_map, where});
  }
  wake_.notify_one();
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

void AgentAttacher::run()
{
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_)
      return;
    Request request = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    handle(request);
    lock.lock();
    busy_ = false;
    if (queue_.empty())
      idle_.notify_all();
  }
}

void AgentAttacher::handle(const Request& request)
{
  bool attached = false;
  if (options_.attach && !request.keeps_perf_map) {
    auto started = std::chrono::steady_clock::now();
    auto loaded = [&]() -> Result<std::string> {
      auto target = attach_target_of(request.pid, options_.proc_root);
      if (!target)
        return fail(target.error());
      // Named by a hash of the library's bytes, computed on the first attach rather than
      // before sampling starts.
      if (file_name_.empty())
        file_name_ = agent_file_name(library_);
      auto path = install_agent(*target, library_, file_name_);
      if (!path)
        return fail(path.error());
      if (auto ok = load_agent(*target, *path, "", options_.timeout); !ok)
        return fail(ok.error());
      return *path;
    }();
    std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
    std::lock_guard lock(mutex_);
    if (loaded) {
      attached = true;
      ++attached_;
      spdlog::info("JVM {} ({}): loaded flamebpf's agent from {} in {:.3f} s", request.pid,
                   request.where, *loaded, took.count());
    } else {
      ++failed_;
      spdlog::warn("JVM {} ({}): cannot load flamebpf's agent, so its JIT-compiled frames stay "
                   "unnamed: {}",
                   request.pid, request.where, loaded.error().message);
    }
  }
  check_frame_pointers(request, attached);
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
