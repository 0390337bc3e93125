// HotSpot's dynamic attach protocol on Linux, spoken from the host to a JVM in a container: the
// client side of what `jcmd` and VirtualMachine.attach do, without a JDK on the host.
//
// The JVM listens on the UNIX socket /tmp/.java_pid<ns_pid> of its own mount namespace once its
// attach listener runs. The listener starts lazily: a client creates the trigger file
// .attach_pid<ns_pid> (in the JVM's working directory or /tmp), owned by the JVM's user, and
// sends the JVM SIGQUIT; the JVM's signal thread sees the trigger and starts the listener instead
// of printing a thread dump.
//
// One connection carries one request and one reply, then the JVM closes it:
//   request: "1\0" <command> "\0" <arg0> "\0" <arg1> "\0" <arg2> "\0"
//            (protocol version 1, which JDK 8 to JDK 25 all accept; always exactly three
//            arguments, empty ones as "")
//   reply:   <status> "\n" <body>, up to end of stream; status is a decimal jint: 0 (JNI_OK), -1
//            (JNI_ERR) or 101 (protocol mismatch).
// JDK 24 added a version 2 with any number of arguments and JDK 25 options such as "streaming";
// both are opt-in, and version 1 stays accepted, so this client speaks version 1 only.
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

namespace flamebpf::jvm {

// What the attach needs to know about one JVM process.
struct AttachTarget {
  uint32_t host_pid = 0; // the JVM's pid as flamebpf sees it
  uint32_t ns_pid = 0; // its pid in its own (innermost) pid namespace: names the socket and trigger
  uint32_t uid = 0;    // its effective uid, as the host sees it
  uint32_t gid = 0;    // its effective gid, as the host sees it
  // "<proc_root>/<host_pid>", naming the process's files in messages. Nothing is opened by this
  // name: a pid can pass to another process at any time.
  std::string process_path;
  bool catches_sigquit = false; // when read: false before HotSpot installs its handlers, or -Xrs
  // Its start time (/proc/<pid>/stat), read through process_dir; nullopt if there is none.
  std::optional<uint64_t> start_time;
  // The process's directory <proc_root>/<host_pid>, opened once, before anything was read of it.
  // Every file of the attach is reached through it (status, stat, root, cwd) and SIGQUIT goes
  // through it (a /proc/<pid> directory is a pidfd): once that process is gone, all of these fail
  // (ESRCH), even if another process has its pid by then. Shared by copies of the target.
  std::shared_ptr<const UniqueFd> process_dir;
};

// The fields of /proc/<pid>/status that the attach needs.
struct ProcessStatus {
  std::optional<uint32_t> ns_pid; // last NSpid entry; absent on kernels before 4.1
  uint32_t euid = 0;              // second field of Uid:
  uint32_t egid = 0;              // second field of Gid:
  bool catches_sigquit = false;   // SigCgt has SIGQUIT and SigIgn does not
};

// Parses the text of /proc/<pid>/status. Fails if Uid: or Gid: is missing or malformed.
[[nodiscard]] Result<ProcessStatus> parse_process_status(std::string_view text);

// Opens <proc_root>/<host_pid> and reads its stat and status through it. Without an NSpid line,
// ns_pid is host_pid (what the JDK's own client assumes too). Fails if the process is gone.
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

// Limits of protocol version 1: HotSpot drops a request that exceeds them without a reply.
inline constexpr size_t kMaxCommandBytes = 16;
inline constexpr size_t kMaxArgumentBytes = 1024;
inline constexpr size_t kArgumentCount = 3;
// The most reply bytes read before giving up. flamebpf sends only load and jcmd VM.flags, whose
// replies are a few KiB; a JVM that sends more is not trusted with more memory.
inline constexpr size_t kMaxReplyBytes = 1 << 20;
// The status a JVM sends when it does not speak the request's protocol version.
inline constexpr int kStatusBadVersion = 101;

// The bytes of a version 1 request. Fails (nothing is sent) on an empty or too long command, more
// than three arguments, a too long argument or an embedded NUL.
[[nodiscard]] Result<std::string> encode_request(std::string_view command,
                                                 const std::vector<std::string>& args);

// A reply split into its status line and body.
struct Reply {
  int status = 0;   // 0 on success
  std::string body; // everything after the status line, possibly empty
};

// Splits everything read from the socket into status and body. An empty reply (the JVM closed the
// connection: it refused our credentials or the request), a missing newline (truncated) and a
// status line that is not a decimal int are errors.
[[nodiscard]] Result<Reply> parse_reply(std::string_view raw);

// The body of a reply whose status is 0; otherwise an error naming the command, the status and
// the first line of the body.
[[nodiscard]] Result<std::string> check_reply(const Reply& reply, std::string_view command);

// Interprets the reply to "load". When Agent_OnAttach ran, the body's first line is its result N,
// as "return code: N" (since JDK-8252657, JDK 16; JDK 17 and 25 checked) or as the bare number
// (JDK 8); a non-zero N is an error. Otherwise the library did not load and the body says why:
// "<path> was not loaded." then dlerror()'s text, "Agent_OnAttach is not available in <path>",
// or "Dynamic agent loading is not enabled..." (-XX:-EnableDynamicAgentLoading). The status is
// -1 in those cases up to JDK 20 and 0 from JDK 21 on (JDK 25 checked), so it is not relied on.
[[nodiscard]] Result<> check_load_reply(const Reply& reply);

// Sends one request and returns the reply, whatever its status. Starts the attach listener first
// if the socket does not exist: makes sure a trigger HotSpot accepts is where it looks (see
// below), sends SIGQUIT (only if the JVM catches it, read from its status), waits for the socket,
// then removes the trigger if it made one. Connects with the target's uid/gid when flamebpf's
// differ (in a short-lived child process), because a JVM in a user namespace sees host root as
// an unmapped user and refuses it. The whole sequence ends within `timeout` (plus at most 100 ms
// for a connecting child to exit): a JVM that never answers, or answers garbage, costs one
// timeout and an error.
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

} // namespace flamebpf::jvm
