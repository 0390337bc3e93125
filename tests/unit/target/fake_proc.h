// A /proc tree for the target tests: processes that flamebpf reads container names from
// (dockerd, containerd, conmon), each with its own root directory.
#pragma once

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "test_support.h"

namespace flamebpf::testing {

// A NUL-separated command line, as /proc/<pid>/cmdline holds it.
inline std::string nul_joined(std::initializer_list<std::string> args)
{
  std::string joined;
  for (const auto& arg : args) {
    joined += arg;
    joined.push_back('\0');
  }
  return joined;
}

// An OCI spec (config.json) with these annotations, as a runtime writes it for a container.
inline std::string oci_spec(const std::map<std::string, std::string>& annotations)
{
  nlohmann::json spec = {{"ociVersion", "1.0.2-dev"},
                         {"process", {{"args", {"/pause"}}, {"cwd", "/"}}},
                         {"root", {{"path", "rootfs"}}}};
  spec["annotations"] = annotations;
  return spec.dump(2);
}

// The annotations containerd's CRI plugin gives a container of a pod (a sandbox if container is
// empty).
inline std::map<std::string, std::string> cri_annotations(const std::string& namespace_name,
                                                          const std::string& pod,
                                                          const std::string& container,
                                                          const std::string& pod_uid)
{
  std::map<std::string, std::string> annotations = {
      {"io.kubernetes.cri.container-type", container.empty() ? "sandbox" : "container"},
      {"io.kubernetes.cri.sandbox-namespace", namespace_name},
      {"io.kubernetes.cri.sandbox-name", pod},
      {"io.kubernetes.cri.sandbox-uid", pod_uid}};
  if (!container.empty())
    annotations["io.kubernetes.cri.container-name"] = container;
  return annotations;
}

// The tree lives in a scratch directory, removed with it.
class FakeProc {
public:
  FakeProc() : root_(dir_.path().string() + "/proc") { write_file(root_ + "/self/ns/pid", "ours"); }

  const std::string& root() const { return root_; }

  // Who a process runs as, and from which program.
  enum class Identity {
    kRoot,                // euid 0, a program only root may change (/bin/sh)
    kUser,                // euid 1000, the same program
    kRootWritableProgram, // euid 0, a program anyone may change
  };

  // A process named comm with a command line; it shares flamebpf's PID namespace when
  // same_namespace (its ns/pid is then the same file as self/ns/pid). Returns its root
  // directory, <proc>/<pid>/root.
  std::string add_process(int pid,
                          const std::string& comm,
                          const std::string& cmdline,
                          bool same_namespace = true,
                          Identity identity = Identity::kRoot) const
  {
    std::string base = root_ + "/" + std::to_string(pid);
    write_file(base + "/comm", comm + "\n");
    write_file(base + "/cmdline", cmdline);
    std::string uid = identity == Identity::kUser ? "1000" : "0";
    write_file(base + "/status",
               "Name:\t" + comm + "\nUid:\t" + uid + "\t" + uid + "\t" + uid + "\t" + uid + "\n");
    if (identity == Identity::kRootWritableProgram) {
      std::string program = (dir_.path() / "writable-program").string();
      write_file(program, "");
      std::filesystem::permissions(program, std::filesystem::perms::all);
      std::filesystem::create_symlink(program, base + "/exe");
    } else {
      std::filesystem::create_symlink("/bin/sh", base + "/exe");
    }
    std::filesystem::create_directories(base + "/ns");
    if (same_namespace)
      std::filesystem::create_hard_link(root_ + "/self/ns/pid", base + "/ns/pid");
    else
      write_file(base + "/ns/pid", "theirs");
    std::filesystem::create_directories(base + "/root");
    return base + "/root";
  }

  // A containerd run with --state /run/containerd (pid 400), and the spec of each container it
  // runs: write_task(namespace, id, spec). Returns the task directory of its state.
  std::string add_containerd() const
  {
    return add_process(400, "containerd",
                       nul_joined({"/usr/bin/containerd", "--state", "/run/containerd"})) +
           "/run/containerd/io.containerd.runtime.v2.task";
  }

private:
  TempDir dir_;
  std::string root_;
};

} // namespace flamebpf::testing
