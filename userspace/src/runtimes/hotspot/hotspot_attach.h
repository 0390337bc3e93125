// HotSpot's dynamic attach on Linux, from the host to a JVM in a container: the client side of
// what `jcmd` and VirtualMachine.attach do, without a JDK on the host.
//
// The JVM listens on the UNIX socket /tmp/.java_pid<ns_pid> of its own mount namespace once its
// attach listener runs. The listener starts lazily: a client creates the trigger file
// .attach_pid<ns_pid> (in the JVM's working directory or /tmp), owned by the JVM's user, and
// sends the JVM SIGQUIT; the JVM's signal thread sees the trigger and starts the listener instead
// of printing a thread dump.
//
// This file holds that sequence; one connection carries one request and one reply, in the bytes
// of attach_protocol.h, over an AttachConnection (attach_connection.h).
//
// The container's files are untrusted: every path is resolved inside the target's root, the
// socket is reached through a descriptor (never a path the kernel would resolve with symlinks),
// nothing but the trigger flamebpf creates is ever opened for real, and every wait is bounded by
// the caller's timeout. The process is reached through one descriptor of its /proc directory, so
// a pid that passes to another process meanwhile leads nowhere.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "runtimes/hotspot/attach_protocol.h"

namespace flamebpf::hotspot {

// What the attach needs to know about one JVM process.
struct AttachTarget {
  uint32_t host_pid = 0; // the JVM's pid as flamebpf sees it
  uint32_t ns_pid = 0; // its pid in its own (innermost) pid namespace: names the socket and trigger
  uint32_t uid = 0;    // its effective uid, as the host sees it
  uint32_t gid = 0;    // its effective gid, as the host sees it
  // "<proc_root>/<host_pid>", naming the process's files in messages. Nothing is opened by this
  // name: a pid can pass to another process at any time.
  std::string process_path;
  // Whether it handles SIGQUIT, when its status was read: false before HotSpot installs its
  // handlers, with -Xrs, or for most programs that are no JVM. Only such a process is signalled.
  bool catches_sigquit = false;
  // Its start time (/proc/<pid>/stat), read through process_dir; nullopt if there is none.
  std::optional<uint64_t> start_time;
  // The process's directory <proc_root>/<host_pid>, opened once, before anything was read of it.
  // Every file of the attach is reached through it (status, stat, root, cwd) and SIGQUIT goes
  // through it (a /proc/<pid> directory is a pidfd): once that process is gone, all of these fail
  // (ESRCH), even if another process has its pid by then. Shared by copies of the target.
  std::shared_ptr<const UniqueFd> process_dir;
};

// Opens <proc_root>/<host_pid> and reads its stat and status through it (the status is read only
// here). Without an NSpid line, ns_pid is host_pid (what the JDK's own client assumes too). Fails
// if the process is gone, or if its status has no valid Uid: or Gid: line or a malformed NSpid:.
[[nodiscard]] Result<AttachTarget> attach_target_of(uint32_t host_pid,
                                                    const std::string& proc_root = "/proc");

// The first max_bytes of a file of the target's process directory, e.g. "maps" or "cmdline",
// read through target.process_dir.
[[nodiscard]] Result<std::string>
read_process_file(const AttachTarget& target, const std::string& name, size_t max_bytes);

// The target's root directory as an O_PATH descriptor, reached through target.process_dir (the
// kernel's link to that process's root, whatever its pid names now).
[[nodiscard]] Result<UniqueFd> open_root(const AttachTarget& target);

// Whether the target's process has exited (its process directory is empty now).
[[nodiscard]] bool exited(const AttachTarget& target);

// Sends one request and returns the reply, whatever its status. Starts the attach listener first
// if the socket does not exist: makes sure a trigger HotSpot accepts is where it looks (see
// below), sends SIGQUIT (only if target.catches_sigquit, and only while the process still has
// target.start_time), waits for the socket, then removes the trigger if it made one. Connects
// with the target's uid/gid (see AttachConnection::open), because a JVM in a user namespace sees
// host root as an unmapped user and refuses it. The whole sequence ends within `timeout` (plus at
// most 100 ms for a connecting child to exit): a JVM that never answers, or answers garbage, costs
// one timeout and an error.
//
// The trigger: HotSpot looks for .attach_pid<ns_pid> in its working directory, and only if there
// is none there, in its /tmp; it takes one owned by its euid or root and ignores any other.
// flamebpf creates the trigger in /tmp as the JVM's uid/gid (O_EXCL, so nothing is ever
// followed or taken over) and removes it afterwards. One that exists already is used as it is,
// if it is a regular file with one link owned by the JVM's uid or root; anything else (another
// user's file, a hard link, a device, a link) is left alone, never opened, and the trigger is
// created in the working directory instead, where HotSpot looks first. Fails, naming the owner,
// when another user's file holds the working directory's name or both.
[[nodiscard]] Result<Reply> exchange(const AttachTarget& target,
                                     std::string_view command,
                                     const std::vector<std::string>& args,
                                     std::chrono::milliseconds timeout);

// exchange() followed by check_reply(): the body of a successful command.
[[nodiscard]] Result<std::string> execute(const AttachTarget& target,
                                          std::string_view command,
                                          const std::vector<std::string>& args,
                                          std::chrono::milliseconds timeout);

// Loads a JVMTI agent: library_path_in_target is an absolute path as the JVM sees it (e.g. what
// install_agent returns); options are passed to Agent_OnAttach. Fails if the library does not load
// or Agent_OnAttach returns non-zero.
[[nodiscard]] Result<> load_agent(const AttachTarget& target,
                                  const std::string& library_path_in_target,
                                  const std::string& options,
                                  std::chrono::milliseconds timeout);

// Runs a diagnostic command, e.g. "VM.flags" or "GC.class_histogram -all", and returns its output.
// On JDK 25 output streams: the status is sent before the command runs, so an error raised while
// it runs shows up only in the returned text; an unknown command still fails.
[[nodiscard]] Result<std::string> jcmd(const AttachTarget& target,
                                       const std::string& command_line,
                                       std::chrono::milliseconds timeout);

} // namespace flamebpf::hotspot
