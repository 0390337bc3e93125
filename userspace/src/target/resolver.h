// Turns what the user calls a container into the cgroup2 directory the kernel filter matches.
// A --cgroup argument is tried, in this order, as: an absolute cgroup2 path; a path relative to
// the cgroup2 mount; a Kubernetes pod (<namespace>/<pod>) or a container of one
// (<namespace>/<pod>/<container>); a full or unique-prefix container ID (at least 4 hex digits)
// or pod UID; a container name.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/memory_account.h"
#include "common/result.h"
#include "profile/symbolized_profile.h"
#include "target/container_inventory.h"
#include "target/container_names.h"

namespace flamebpf::target {

// What is being profiled: a cgroup2 directory (a container's, a pod's or any other) or a process.
struct Target {
  std::string argument;         // the --cgroup or --pid argument; empty for a discovered container
  std::string name;             // in outputs and messages: container name, else short ID, else path
  std::string container_id;     // full ID when the target is a container
  std::string cgroup_path;      // absolute cgroup2 directory; empty for a process target
  uint64_t cgroup_id = 0;       // the kernel's id of cgroup_path
  uint32_t level = 0;           // depth of cgroup_path below the cgroup2 root
  uint32_t pid = 0;             // for a process target: its host pid
  profile::TargetLabels labels; // the container and pod it is, where it is one
};

// Every container and pod cgroup on the host with the containers' names, read together.
class ContainerDirectory {
public:
  // proc_root is normally "/proc"; tests point both at fixture trees.
  ContainerDirectory(std::string cgroup2_mount, std::string proc_root = "/proc");

  // Rescans the cgroup tree; with names, also rereads the runtimes' names.
  void refresh(bool names = true);
  // What the inventory and the names take is measured in account from now on, after each
  // refresh. Measured, not charged: they are the host's containers, bounded by the walk's and
  // the runtimes' limits, and no target may be refused the name its samples are filed under.
  void measure_memory(std::shared_ptr<MemoryAccount> account);

  const std::string& cgroup2_mount() const { return cgroup2_mount_; }
  const CgroupInventory& inventory() const { return inventory_; }
  ContainerNames& names() { return names_; }

  // The container's name, else its ID's first 12 digits (as `docker ps` shows it).
  std::string display_name(const std::string& container_id);
  // Whether the container is a Kubernetes pod's sandbox (pause container): not a target of its
  // own with --all-containers, as it runs nothing of the pod's.
  bool is_pod_sandbox(const std::string& container_id);
  // The pod with this UID, from the names of its containers (container and sandbox left empty);
  // nullopt if none of them is named.
  std::optional<PodMember> pod_of(const std::string& pod_uid);
  // The labels of a container: its ID, and its name and pod where a runtime names them.
  profile::TargetLabels container_labels(const std::string& container_id);

  // A Target for a container found in the inventory.
  Target container_target(const ContainerCgroup& container);

private:
  // Measures the inventory and the names again.
  void measure();

  std::string cgroup2_mount_;
  CgroupInventory inventory_;
  ContainerNames names_;
  MemoryCharge memory_;
};

// Resolves one --cgroup argument against directory (refreshed by the caller). Fails with a usage
// error of one line: an unknown argument lists the closest running containers, an ambiguous ID
// prefix or name lists what it matches.
[[nodiscard]] Result<Target> resolve_target(const std::string& argument,
                                            ContainerDirectory& directory);

// Edit distance between a and b (Levenshtein), for suggesting close names.
size_t edit_distance(std::string_view a, std::string_view b);

} // namespace flamebpf::target
