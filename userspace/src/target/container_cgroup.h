// Recognizes containers and Kubernetes pods in cgroup paths, as each runtime names its cgroups:
//   Docker      /docker/<id>                       /system.slice/docker-<id>.scope
//   containerd  /kubepods/<qos>/pod<uid>/<id>      /kubepods.slice/…/cri-containerd-<id>.scope
//   CRI-O       /kubepods/<qos>/pod<uid>/<id>      /kubepods.slice/…/crio-<id>.scope
//   podman      /libpod_parent/libpod-<id>         /machine.slice/libpod-<id>.scope
// Pure functions over path text, so every layout is testable from fixtures.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flamebpf::target {

enum class Runtime : uint8_t {
  kDocker,
  kContainerd,
  kCrio,
  kPodman,
  kKubernetes, // a bare ID below a pod: containerd, CRI-O or Docker under the cgroupfs driver
  kUnknown,    // a bare ID elsewhere, e.g. below a custom --cgroup-parent
};

// "docker", "containerd", "cri-o", "podman", "kubernetes" or "container".
std::string_view runtime_name(Runtime runtime);

// Whether text is a full container ID: 64 lowercase hex digits.
bool is_container_id(std::string_view text);

struct ContainerCgroupMatch {
  std::string id; // the full container ID
  Runtime runtime = Runtime::kUnknown;
  std::string cgroup;  // the container's own cgroup: path up to and including its component
  std::string pod_uid; // the Kubernetes pod it belongs to, if any (dashed form)
};

// The container a cgroup path belongs to: the outermost path component that names a container,
// so that a sub-cgroup made inside a container still counts for it. nullopt outside containers.
// path is absolute within its hierarchy ("/docker/<id>/sub").
std::optional<ContainerCgroupMatch> container_of_cgroup(std::string_view path);

// The pod UID named by one path component: "pod<uid>" (cgroupfs driver) or
// "kubepods-<qos>-pod<uid with underscores>.slice" (systemd driver). Returned with dashes.
std::optional<std::string> pod_of_component(std::string_view component);

} // namespace flamebpf::target
