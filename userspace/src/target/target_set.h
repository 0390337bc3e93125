// The targets of one run as they come and go: resolves the command line's targets, finds every
// container with --all-containers, and follows them: a stopped container is reported once and
// dropped, a container started under a wanted name (or a new one, with --all-containers) is added.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "profile/target_names.h"
#include "target/resolver.h"

namespace flamebpf::target {

struct TargetOptions {
  std::vector<std::string> cgroups; // --cgroup arguments
  std::vector<uint32_t> pids;       // --pid arguments (thread ids allowed)
  bool all_containers = false;      // every container on the host, including later ones
  bool containers_only = false;     // with all_containers: no "host" target
};

// What refresh() changed, for the kernel filter.
struct TargetChanges {
  std::vector<Target> added;
  std::vector<Target> removed;
  bool empty() const { return added.empty() && removed.empty(); }
};

class TargetSet {
public:
  // Resolves every target; an unknown or ambiguous one is a usage error.
  [[nodiscard]] static Result<TargetSet> create(const TargetOptions& options,
                                                ContainerDirectory directory,
                                                const std::string& proc_root = "/proc");

  // Targets profiled now.
  const std::vector<Target>& live() const { return live_; }
  // Whether samples of no target are kept (as "host").
  bool keeps_unmatched() const;
  // Whether the profile is split into one output per target.
  bool per_target_output() const;
  // Targets given on the command line.
  size_t requested() const { return options_.cgroups.size() + options_.pids.size(); }
  // Whether containers may appear that refresh() would add: with --all-containers, or while a
  // requested container is stopped.
  bool follows_changes() const;
  // Every cgroup directory below which a followed container could appear, for a watcher.
  const std::vector<std::string>& watched_directories() const;

  // Checks every live target, drops stopped ones, re-resolves waiting ones and (with
  // all_containers) adds new containers. With reresolve (SIGHUP), every requested target is
  // resolved again too, and follows its argument to another cgroup if it names one now.
  // Reports each change once in the log.
  TargetChanges refresh(bool reresolve = false);

  // Names of every target whose samples may still be in the kernel's buffers: live ones and
  // dropped ones not yet forgotten.
  profile::TargetNames names() const;
  // The labels of those targets that have any, by name (a live target's over a dropped one's).
  std::map<std::string, profile::TargetLabels> labels() const;
  // The labels of the containers of live pod targets, by container ID.
  std::map<std::string, profile::TargetLabels> pod_container_labels() const;
  // How many targets were dropped so far; taken just before a drain, and given to
  // forget_dropped() once that drain is symbolized.
  size_t dropped_mark() const { return forgotten_ + retired_.size(); }
  // Forgets the targets dropped before mark: none of their samples are left in the kernel. Those
  // dropped later may still have samples in the buffer being written.
  void forget_dropped(size_t mark);

private:
  TargetSet(TargetOptions options, ContainerDirectory directory, std::string proc_root);
  bool is_live(const Target& target) const;
  bool has_pod_target() const;
  // Finds the containers of the live pod targets in the last scan of the cgroup tree.
  void find_pod_containers();
  void make_names_unique(Target& target) const;
  void retire(Target target);

  TargetOptions options_;
  ContainerDirectory directory_;
  std::string proc_root_;
  std::vector<Target> live_;
  std::vector<Target> waiting_; // requested containers that stopped, re-resolved on refresh
  std::vector<Target> retired_; // dropped, but samples may remain in the kernel's buffers
  size_t forgotten_ = 0;        // dropped targets already forgotten, for dropped_mark()
  std::vector<std::string> watched_;
  // The containers of live pod targets: cgroup2 path below the mount, and labels.
  std::vector<std::pair<std::string, profile::TargetLabels>> pod_containers_;
};

} // namespace flamebpf::target
