// Finds every container (and Kubernetes pod) cgroup in the cgroup2 hierarchy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "target/container_cgroup.h"

namespace flamebpf::target {

// A cgroup2 directory that some runtime made for one container.
struct ContainerCgroup {
  std::string id;                      // full container ID
  Runtime runtime = Runtime::kUnknown; // which runtime's naming matched
  std::string pod_uid;                 // Kubernetes pod, if any
  std::string path;                    // below the cgroup2 mount, e.g. "/docker/<id>"
  uint64_t cgroup_id = 0;              // the kernel's id of the directory
  uint32_t level = 0;                  // depth below the cgroup2 root
};

// The cgroup2 directory of a Kubernetes pod.
struct PodCgroup {
  std::string uid;  // dashed pod UID
  std::string path; // below the cgroup2 mount
  uint64_t cgroup_id = 0;
  uint32_t level = 0;
};

struct CgroupInventory {
  std::vector<ContainerCgroup> containers;
  std::vector<PodCgroup> pods;
  // Every directory visited (below the mount, "/" first): where new containers can appear.
  // Container directories are not descended into.
  std::vector<std::string> directories;
  bool truncated = false; // the walk stopped at max_directories
};

// Walks the cgroup2 hierarchy mounted at cgroup2_mount. Only directories owned by the owner of the
// hierarchy's root (root) are taken for containers and pods: a subtree delegated to another user
// holds plain cgroups, whatever their names.
// Directories that vanish during the walk are skipped; at most max_directories are visited.
CgroupInventory scan_cgroup_tree(const std::string& cgroup2_mount,
                                 size_t max_directories = 1 << 16);

} // namespace flamebpf::target
