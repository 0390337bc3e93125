// Container names as the user knows them, read from the runtimes' own state without talking to
// any daemon's socket: Docker's config.v2.json under each running dockerd's data root; the OCI
// specs containerd keeps in its state directory, whose annotations (from its CRI plugin) place a
// container in a Kubernetes pod; and the command lines of conmon (podman's and CRI-O's container
// monitor) with the spec in the bundle they name.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/result.h"

namespace flamebpf::target {

// What a dockerd command line says about where its state lives.
struct DockerdArguments {
  std::string data_root;   // --data-root (or the older -g/--graph); empty if not given
  std::string config_file; // --config-file; empty if not given
};

// Parses a NUL-separated /proc/<pid>/cmdline of dockerd.
DockerdArguments parse_dockerd_cmdline(std::string_view cmdline);

// The "data-root" (or older "graph") of a daemon.json; nullopt if absent or not JSON.
std::optional<std::string> parse_daemon_json_data_root(std::string_view json);

// The fields of a Docker container's config.v2.json that flamebpf uses.
struct DockerContainerConfig {
  std::string id;
  std::string name; // without Docker's leading '/'
  bool running = false;
};

// Parses config.v2.json text; nullopt if it is not a container's configuration.
std::optional<DockerContainerConfig> parse_docker_config(std::string_view json);

// A container ID and name from a NUL-separated conmon command line (-c/--cid, -n/--name), and
// its OCI bundle directory (-b/--bundle), empty if not given.
struct ConmonArguments {
  std::string id;
  std::string name;
  std::string bundle;
};
std::optional<ConmonArguments> parse_conmon_cmdline(std::string_view cmdline);

// What a containerd command line says about where its state lives.
struct ContainerdArguments {
  std::string state;       // --state; empty if not given
  std::string config_file; // -c/--config; empty if not given
};
ContainerdArguments parse_containerd_cmdline(std::string_view cmdline);

// The top-level state = "..." of a containerd config.toml; nullopt if it sets none.
std::optional<std::string> parse_containerd_config_state(std::string_view toml);

// Whether text is a DNS-1123 label (1 to 63 of [a-z0-9-], a letter or digit at each end), as
// Kubernetes namespace and container names are.
bool is_dns_label(std::string_view text);
// Whether text is a DNS-1123 subdomain (labels joined by '.', 253 bytes at most), as pod names are.
bool is_dns_subdomain(std::string_view text);

// A container's place in Kubernetes.
struct PodMember {
  std::string namespace_name;
  std::string pod;
  std::string container; // empty for the pod's sandbox
  std::string pod_uid;   // dashed
  bool sandbox = false;  // the pod's pause container, which only holds its namespaces
};

// The runtime whose state holds an OCI spec: each writes its own annotation keys.
enum class PodRuntime { kContainerd, kCrio };

// The pod a container belongs to, from the annotations of its OCI spec (config.json): the keys
// of the runtime that wrote it alone, containerd's CRI plugin's (io.kubernetes.cri.*) or CRI-O's
// (io.kubernetes.pod.*). A pod's own annotations reach the spec too, so the other runtime's keys
// there are anyone's: a pod naming itself as another tenant's is not believed. nullopt if the
// spec has none. Names Kubernetes would refuse (a '/', "..", a newline, markup, over 253 bytes)
// are refused too: only the kubelet, or whoever runs the runtime, writes these, and a forged one
// must not become a file name or label; refusal is an error naming the field.
Result<std::optional<PodMember>> parse_pod_annotations(std::string_view config_json,
                                                       PodRuntime runtime);

// "<namespace>/<pod>/<container>"; a sandbox is "<namespace>/<pod>/POD", as the kubelet called
// pause containers (no container may be named so: Kubernetes names are lowercase).
std::string pod_member_name(const PodMember& member);

struct NamedContainer {
  std::string id;
  std::string name;
  // where the name came from, for messages: "docker /var/lib/docker", "containerd /run/containerd",
  // "conmon"
  std::string source;
  std::optional<PodMember> pod;
};

// The names of the host's containers. Only runtime processes in flamebpf's own PID namespace,
// running as root from an executable only root can change, are trusted: a process inside a
// container, or any user's program named dockerd, could otherwise rename others.
class ContainerNames {
public:
  // proc_root is normally "/proc"; tests point it at a fixture tree.
  explicit ContainerNames(std::string proc_root = "/proc");

  // Rereads every source.
  void refresh();
  // Every named container found by the last refresh.
  const std::vector<NamedContainer>& all() const { return all_; }
  // The name of container id: from the last refresh, else read from the known data roots and
  // state directories now (a container that started since). nullopt if no runtime names it.
  std::optional<std::string> name_of(const std::string& id);
  // All that is known of container id, read as name_of reads; nullptr if no runtime names it.
  // Valid until the next refresh.
  const NamedContainer* find(const std::string& id);
  // Docker data roots found by the last refresh, as paths readable from flamebpf.
  const std::vector<std::string>& docker_data_roots() const { return docker_roots_; }
  // What the names take in memory, roughly: the containers, their index and the messages said.
  uint64_t memory_bytes() const;

private:
  // A daemon's state directory, seen from flamebpf.
  struct DataRoot {
    std::string process_root; // /proc/<daemon pid>/root
    std::string data_root;    // the path inside that root
  };
  std::vector<DataRoot> find_docker_data_roots() const;
  std::vector<DataRoot> find_containerd_states() const;
  std::optional<DockerContainerConfig> read_docker_config(const DataRoot& root,
                                                          const std::string& id) const;
  // The container id of a containerd namespace, from its OCI spec; nullopt if it is no
  // Kubernetes container (Docker's own, in namespace moby, are named from Docker's state).
  std::optional<NamedContainer> read_containerd_task(const DataRoot& state,
                                                     const std::string& namespace_dir,
                                                     const std::string& id) const;
  // The containers of containerd's state directory (at most kMaxTasks), or only id if given.
  void read_containerd_tasks(const DataRoot& state, const std::string& only_id);
  bool trusted(const std::string& pid) const;
  void add(NamedContainer container);
  // Says message once for container id, whose spec names no pod Kubernetes could have made.
  void warn_once(const std::string& id, const std::string& message) const;

  std::string proc_root_;
  std::vector<DataRoot> roots_;
  std::vector<DataRoot> containerd_states_;
  std::vector<std::string> docker_roots_;
  std::vector<NamedContainer> all_;
  std::unordered_map<std::string, size_t> by_id_; // index into all_
  mutable std::unordered_set<std::string> warned_;
};

} // namespace flamebpf::target
