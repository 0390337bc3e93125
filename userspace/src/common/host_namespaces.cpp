#include "common/host_namespaces.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include "common/procfs.h"
#include "common/unique_fd.h"

namespace flamebpf::host_namespaces {

namespace {

struct Kind {
  const char* name;
  int flag;
  const char* otherwise; // what stays wrong if it cannot be entered
};

constexpr Kind kKinds[] = {
    {"cgroup", CLONE_NEWCGROUP, "cgroup paths are read relative to flamebpf's own cgroup"},
    {"uts", CLONE_NEWUTS, "the node is named after flamebpf's own host name"}};

// kthreadd: created by the kernel with its initial namespaces, and the only process of a PID
// namespace with pid 2 and no parent. (pid 1 may deny access to its namespaces.)
constexpr const char* kKernelThreads = "/proc/2";

bool is_the_kernels_thread_creator()
{
  auto comm = procfs::read_file(std::string(kKernelThreads) + "/comm", 64);
  auto status = procfs::read_file(std::string(kKernelThreads) + "/status", 1 << 16);
  auto parent = status ? procfs::status_field(*status, "PPid", 0) : std::nullopt;
  return comm && *comm == "kthreadd\n" && parent && *parent == 0;
}

} // namespace

std::vector<std::string> enter_the_hosts()
{
  std::vector<std::string> entered;
  if (!is_the_kernels_thread_creator())
    return entered;
  for (const Kind& kind : kKinds) {
    std::string own_path = std::string("/proc/self/ns/") + kind.name;
    std::string host_path = std::string(kKernelThreads) + "/ns/" + kind.name;
    struct stat own {};
    struct stat host {};
    // Unreadable without privilege (flamebpf's own check says what is missing, in one line), or
    // already the same: nothing to do.
    if (::stat(own_path.c_str(), &own) != 0 || ::stat(host_path.c_str(), &host) != 0 ||
        (own.st_dev == host.st_dev && own.st_ino == host.st_ino))
      continue;
    UniqueFd ns(::open(host_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns.valid() || ::setns(ns.get(), kind.flag) != 0) {
      spdlog::warn("cannot enter the host's {} namespace: {}; {}", kind.name, std::strerror(errno),
                   kind.otherwise);
      continue;
    }
    entered.emplace_back(kind.name);
  }
  return entered;
}

} // namespace flamebpf::host_namespaces
