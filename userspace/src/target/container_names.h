// Container names as the user knows them, read from the runtimes' own state without talking to
// any daemon's socket: Docker's config.v2.json under each running dockerd's data root, and the
// command lines of conmon (podman's and CRI-O's container monitor).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

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

// A container ID and name from a NUL-separated conmon command line (-c/--cid, -n/--name).
struct ConmonArguments {
  std::string id;
  std::string name;
};
std::optional<ConmonArguments> parse_conmon_cmdline(std::string_view cmdline);

struct NamedContainer {
  std::string id;
  std::string name;
  std::string source; // where the name came from, for messages: "docker /var/lib/docker", "conmon"
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
  // The name of container id: from the last refresh, else read from the known data roots now
  // (a container that started since). nullopt if no runtime names it.
  std::optional<std::string> name_of(const std::string& id);
  // Docker data roots found by the last refresh, as paths readable from flamebpf.
  const std::vector<std::string>& docker_data_roots() const { return docker_roots_; }

private:
  struct DataRoot {
    std::string process_root; // /proc/<dockerd pid>/root
    std::string data_root;    // the path inside that root
  };
  std::vector<DataRoot> find_docker_data_roots() const;
  std::optional<DockerContainerConfig> read_docker_config(const DataRoot& root,
                                                          const std::string& id) const;
  bool trusted(const std::string& pid) const;

  std::string proc_root_;
  std::vector<DataRoot> roots_;
  std::vector<std::string> docker_roots_;
  std::vector<NamedContainer> all_;
  std::unordered_map<std::string, std::string> by_id_;
};

} // namespace flamebpf::target
