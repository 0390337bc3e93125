// flamebpf in a container of its own (a Kubernetes DaemonSet's pod, `docker run --pid=host`)
// shares the host's processes but, by default, not the host's cgroup and UTS namespaces.
#pragma once

#include <string>
#include <vector>

namespace flamebpf::host_namespaces {

// Moves the calling process into the kernel's initial cgroup and UTS namespaces (those of
// kthreadd, pid 2 of the host's PID namespace) where they differ from its own. In a private cgroup
// namespace /proc/<pid>/cgroup and mountinfo name cgroups relative to the container's own cgroup
// (`/../../kubepods/...`), and in a private UTS namespace the host name is the pod's. Does nothing
// outside the host's PID namespace, where pid 2 is no kernel thread. Must run before any thread
// starts: setns() moves only the calling thread. Returns what it entered ("cgroup", "uts"); what
// it could not enter is left as it was, and logged.
std::vector<std::string> enter_the_hosts();

} // namespace flamebpf::host_namespaces
