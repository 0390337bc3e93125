#include "runtimes/hotspot/hotspot_attach.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <thread>
#include <unistd.h>

#include "common/capabilities.h"
#include "common/contained_file.h"
#include "common/procfs.h"
#include "common/scoped_fs_ids.h"
#include "runtimes/hotspot/attach_connection.h"

namespace flamebpf::hotspot {
namespace {

using Clock = std::chrono::steady_clock;

// HotSpot creates its socket mode 0600 and chowns it to its euid/egid; anything else was not made
// by the JVM (e.g. another user of the container planted it to read our requests, or to keep the
// JVM from creating its own).
Result<> check_socket(int socket_fd, const AttachTarget& target, const std::string& shown)
{
  struct stat status {};
  if (::fstat(socket_fd, &status) != 0)
    return fail(system_error(errno, "cannot stat " + shown));
  std::string holder = "uid " + std::to_string(status.st_uid);
  if (!S_ISSOCK(status.st_mode))
    return fail(error("cannot attach through " + shown + ": not a socket but a file of " + holder +
                      ", which keeps the JVM from creating its attach socket"));
  if (status.st_uid != target.uid)
    return fail(error("cannot attach through " + shown + ": owned by " + holder +
                      ", not by the JVM's uid " + std::to_string(target.uid) +
                      ": another user holds the name of the JVM's attach socket"));
  if ((status.st_mode & 077) != 0)
    return fail(error("cannot attach through " + shown + ": other users may use it"));
  return {};
}

// Why HotSpot would not take the file for a trigger, or why flamebpf must not use it as one;
// empty if it is a regular file with one link owned by the JVM's uid or root (HotSpot accepts its
// euid or root). A hard link would make the trigger another file's name.
std::string trigger_problem(const struct stat& status, const AttachTarget& target)
{
  std::string holder = "held by uid " + std::to_string(status.st_uid);
  if (!S_ISREG(status.st_mode))
    return holder + ", not a regular file";
  if (status.st_nlink != 1)
    return holder + ", a file with " + std::to_string(status.st_nlink) + " links";
  if (status.st_uid != target.uid && status.st_uid != 0)
    return holder + ", neither the JVM's user nor root, so HotSpot ignores it";
  return "";
}

// The trigger .attach_pid<ns_pid> where HotSpot looks for it: the JVM's working directory first,
// then its /tmp (see exchange()). One flamebpf created is removed on destruction; any other file
// is never opened, changed or removed.
class Trigger {
public:
  explicit Trigger(const AttachTarget& target)
      : target_(target), name_(".attach_pid" + std::to_string(target.ns_pid))
  {
  }
  Trigger(const Trigger&) = delete;
  Trigger& operator=(const Trigger&) = delete;
  ~Trigger() { remove(); }

  const std::string& name() const { return name_; }

  // cwd_fd (-1 if unknown) and tmp_fd are the JVM's working directory and /tmp, named cwd_shown
  // and tmp_shown in messages; both must outlive the trigger.
  Result<> place(int cwd_fd, const std::string& cwd_shown, int tmp_fd, const std::string& tmp_shown)
  {
    std::string in_cwd = cwd_shown + "/" + name_;
    std::string in_tmp = tmp_shown + "/" + name_;
    if (cwd_fd >= 0) {
      // HotSpot looks no further than a trigger in its working directory, whoever's it is.
      auto found = inspect(cwd_fd, in_cwd);
      if (!found)
        return fail(found.error());
      if (*found)
        return found->value().empty() ? Result<>()
                                      : fail(error("cannot use attach trigger " + in_cwd + ": " +
                                                   found->value() + "; HotSpot looks there first"));
    }
    std::string tmp_problem;
    auto created = create_in(tmp_fd, in_tmp);
    if (!created)
      tmp_problem = created.error().message;
    else if (*created)
      return {};
    else {
      auto found = inspect(tmp_fd, in_tmp);
      if (!found)
        return fail(found.error());
      if (*found && found->value().empty())
        return {}; // the JVM's own, left by an attach that died or made by a concurrent one
      tmp_problem = *found ? "cannot use attach trigger " + in_tmp + ": " + found->value()
                           : "attach trigger " + in_tmp + " keeps changing";
    }
    if (cwd_fd < 0)
      return fail(error(tmp_problem));
    auto in_working_directory = create_in(cwd_fd, in_cwd);
    if (in_working_directory && *in_working_directory)
      return {};
    return fail(error(tmp_problem + "; nor can one be created in the JVM's working directory: " +
                      (in_working_directory ? in_cwd + " appeared meanwhile"
                                            : in_working_directory.error().message)));
  }

private:
  // What is at the name in dir_fd: nullopt if nothing, "" if a trigger fit to use, else why not.
  Result<std::optional<std::string>> inspect(int dir_fd, const std::string& shown)
  {
    auto found = find_entry(dir_fd, name_, shown);
    if (!found)
      return fail(found.error());
    if (!*found)
      return std::optional<std::string>();
    struct stat status {};
    if (::fstat(found->value().get(), &status) != 0)
      return fail(system_error(errno, "cannot stat " + shown));
    return std::optional<std::string>(trigger_problem(status, target_));
  }

  // Creates the trigger in dir_fd as the JVM's uid/gid: true if created, false if something
  // exists there already (never followed, opened or taken over: O_EXCL).
  Result<bool> create_in(int dir_fd, const std::string& shown)
  {
    std::string ids = std::to_string(target_.uid) + ":" + std::to_string(target_.gid);
    ScopedFsIds as_jvm(target_.uid, target_.gid);
    if (!as_jvm.active())
      return fail(error("cannot create attach trigger " + shown + ": cannot act as uid:gid " + ids +
                        caps::setid_hint()));
    auto created = open_resolved(dir_fd, name_, O_CREAT | O_EXCL | O_NOFOLLOW | O_WRONLY,
                                 kResolveBeneathNoLinks, shown, 0600);
    if (!created) {
      if (created.error().errno_value == EEXIST)
        return false;
      return fail(error("cannot create attach trigger: " + created.error().message));
    }
    struct stat status {};
    if (::fstat(created->get(), &status) != 0) {
      int error_number = errno;
      ::unlinkat(dir_fd, name_.c_str(), 0);
      return fail(system_error(error_number, "cannot stat attach trigger " + shown));
    }
    dir_fd_ = dir_fd;
    device_ = status.st_dev;
    inode_ = status.st_ino;
    return true;
  }

  // Removes the trigger flamebpf created, as the JVM's user, if its name still is that file.
  void remove()
  {
    if (dir_fd_ < 0)
      return;
    ScopedFsIds as_jvm(target_.uid, target_.gid);
    auto found = find_entry(dir_fd_, name_, name_);
    struct stat status {};
    if (found && *found && ::fstat(found->value().get(), &status) == 0 &&
        status.st_dev == device_ && status.st_ino == inode_)
      ::unlinkat(dir_fd_, name_.c_str(), 0);
    dir_fd_ = -1;
  }

  const AttachTarget& target_;
  std::string name_;
  int dir_fd_ = -1; // where the trigger flamebpf created is; -1 if none
  dev_t device_ = 0;
  ino_t inode_ = 0;
};

Result<UniqueFd> open_process_entry(const AttachTarget& target, const char* name, int flags)
{
  std::string shown = target.process_path + "/" + name;
  if (!target.process_dir || !target.process_dir->valid())
    return fail(error("cannot open " + shown + ": the process directory is not open"));
  UniqueFd fd(::openat(target.process_dir->get(), name, flags | O_CLOEXEC));
  if (!fd.valid())
    return fail(system_error(errno, "cannot open " + shown));
  return fd;
}

std::string exited_message(const AttachTarget& target)
{
  return "process " + std::to_string(target.host_pid) + " exited before it could be signalled";
}

// Sends SIGQUIT only to a process that handles it (target.catches_sigquit, from its status):
// SIGQUIT's default action kills, so a JVM that has not yet installed its handlers, runs with
// -Xrs, or a non-JVM would die (the JDK's client checks SigCgt for the same reason). The signal
// goes through the process directory, a pidfd (Linux 5.3+): if the process exited, the signal
// fails instead of reaching one that took the pid.
Result<> send_sigquit(const AttachTarget& target)
{
  std::string pid = std::to_string(target.host_pid);
  auto gone = [&](const Error& e) {
    return e.errno_value == ESRCH || e.errno_value == ENOENT ? fail(error(exited_message(target)))
                                                             : fail(e);
  };
  if (target.start_time) {
    auto stat = read_process_file(target, "stat", 1 << 16);
    if (!stat)
      return gone(stat.error());
    if (procfs::live_start_time_in_stat(*stat) != target.start_time)
      return fail(error("process " + pid + " is no longer the JVM that was to be attached (it " +
                        "exited; its pid may be another process's now)"));
  }
  if (!target.catches_sigquit)
    return fail(error("process " + pid +
                      " does not handle SIGQUIT (not a HotSpot JVM, started with -Xrs, or still "
                      "starting), so it cannot be asked to start its attach listener"));
  long sent = ::syscall(SYS_pidfd_send_signal, target.process_dir->get(), SIGQUIT, nullptr, 0);
  int send_error = errno;
  // Kernels before 5.3 have no pidfd_send_signal, and a directory that is not procfs's own (a
  // copy of one) carries no signal: kill(), as the JDK's client does, right after the checks.
  if (sent != 0 && (send_error == ENOSYS || send_error == EBADF)) {
    sent = ::kill(static_cast<pid_t>(target.host_pid), SIGQUIT);
    send_error = errno;
  }
  if (sent != 0) {
    if (send_error == ESRCH)
      return fail(error(exited_message(target)));
    Error failure = system_error(send_error, "cannot send SIGQUIT to " + pid);
    failure.message += caps::hint(failure.errno_value, caps::kKill);
    return fail(failure);
  }
  return {};
}

// Why the JVM may not have created its socket: HotSpot binds it at <name>.tmp first, and another
// user's file there (in a sticky /tmp) keeps it from doing so. Empty if nothing is known.
std::string socket_blocker(const AttachTarget& target,
                           int tmp_fd,
                           const std::string& name,
                           const std::string& shown)
{
  auto found = find_entry(tmp_fd, name + ".tmp", shown + ".tmp");
  struct stat status {};
  if (!found || !*found || ::fstat(found->value().get(), &status) != 0 ||
      status.st_uid == target.uid)
    return "";
  return "; " + shown + ".tmp, where HotSpot first binds its socket, is held by uid " +
         std::to_string(status.st_uid);
}

// Waits for the socket after SIGQUIT, polling quickly first: the listener usually appears within
// a few milliseconds. Sends SIGQUIT once more halfway, as the JDK's client does, in case the
// first one came while the JVM was still busy starting.
Result<UniqueFd> wait_for_socket(const AttachTarget& target,
                                 int tmp_fd,
                                 const std::string& name,
                                 const std::string& shown,
                                 Clock::time_point start,
                                 Clock::time_point deadline)
{
  auto halfway = start + (deadline - start) / 2;
  bool resent = false;
  auto step = std::chrono::milliseconds(1);
  for (;;) {
    auto socket = find_entry(tmp_fd, name, shown);
    if (!socket)
      return fail(socket.error());
    if (*socket)
      return std::move(**socket);
    auto now = Clock::now();
    if (now >= deadline)
      break;
    if (!resent && now >= halfway) {
      resent = true;
      if (auto sent = send_sigquit(target); !sent)
        return fail(sent.error());
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(step, deadline - now));
    step = std::min(step * 2, std::chrono::milliseconds(32));
  }
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  std::string blocker = socket_blocker(target, tmp_fd, name, shown);
  return fail(error("JVM " + std::to_string(target.host_pid) + " did not create " + shown +
                    " within " + std::to_string(waited.count()) + " ms of SIGQUIT" +
                    (blocker.empty() ? "; try: check that it runs without "
                                       "-XX:+DisableAttachMechanism and is not stuck"
                                     : blocker)));
}

} // namespace

Result<AttachTarget> attach_target_of(uint32_t host_pid, const std::string& proc_root)
{
  AttachTarget target;
  target.host_pid = host_pid;
  target.process_path = proc_root + "/" + std::to_string(host_pid);
  // proc_root is flamebpf's own /proc (or a test's copy), not a target's file.
  UniqueFd dir(::open(target.process_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir.valid())
    return fail(system_error(errno, "cannot open " + target.process_path));
  target.process_dir = std::make_shared<const UniqueFd>(std::move(dir));
  if (auto stat = read_process_file(target, "stat", 1 << 16))
    target.start_time = procfs::live_start_time_in_stat(*stat);
  // The only read of the status in an attach: ids, namespace pid and signal dispositions.
  auto status = read_process_file(target, "status", 1 << 16);
  if (!status)
    return fail(status.error());
  auto malformed = [&](std::string_view field) {
    return fail(error("cannot parse " + target.process_path + "/status: malformed " +
                      std::string(field) + " line (or none)"));
  };
  // The effective ids, the second values of Uid: and Gid:.
  auto uid = procfs::status_field(*status, "Uid", 1);
  if (!uid)
    return malformed("Uid");
  auto gid = procfs::status_field(*status, "Gid", 1);
  if (!gid)
    return malformed("Gid");
  // Kernels before 4.1 have no NSpid line: the process then shares flamebpf's pid namespace.
  auto ns_pid = procfs::status_field(*status, "NSpid", -1);
  if (!ns_pid && procfs::status_line(*status, "NSpid"))
    return malformed("NSpid");
  target.ns_pid = ns_pid.value_or(host_pid);
  target.uid = *uid;
  target.gid = *gid;
  target.catches_sigquit = procfs::catches_signal(*status, SIGQUIT);
  return target;
}

Result<std::string>
read_process_file(const AttachTarget& target, const std::string& name, size_t max_bytes)
{
  auto file = open_process_entry(target, name.c_str(), O_RDONLY | O_NOFOLLOW);
  if (!file)
    return fail(file.error());
  return read_bounded(file->get(), max_bytes, false, target.process_path + "/" + name);
}

Result<UniqueFd> open_root(const AttachTarget& target)
{
  // "root" is the kernel's link to the process's root directory: followed on purpose.
  return open_process_entry(target, "root", O_PATH | O_DIRECTORY);
}

bool exited(const AttachTarget& target)
{
  // The root is gone with the process, already while it is a zombie.
  return !open_root(target).has_value();
}

Result<Reply> exchange(const AttachTarget& target,
                       std::string_view command,
                       const std::vector<std::string>& args,
                       std::chrono::milliseconds timeout)
{
  auto start = Clock::now();
  auto deadline = start + timeout;
  auto request = encode_request(command, args);
  if (!request)
    return fail(request.error());
  std::string jvm = "JVM " + std::to_string(target.host_pid);
  auto in_jvm = [&](const Error& e) {
    return fail(Error{e.errno_value, "cannot attach to " + jvm + ": " + e.message});
  };

  auto root_fd = open_root(target);
  if (!root_fd)
    return in_jvm(root_fd.error());
  std::string tmp_shown = target.process_path + "/root/tmp";
  auto tmp_fd = open_directory_at(root_fd->get(), "/tmp", kResolveInRoot, tmp_shown);
  if (!tmp_fd)
    return in_jvm(tmp_fd.error());
  std::string socket_name = ".java_pid" + std::to_string(target.ns_pid);
  std::string socket_shown = tmp_shown + "/" + socket_name;
  auto found = find_entry(tmp_fd->get(), socket_name, socket_shown);
  if (!found)
    return in_jvm(found.error());
  UniqueFd socket_file;
  if (*found) {
    socket_file = std::move(**found);
  } else {
    // The working directory as the JVM has it (a relative path to HotSpot); unknown in a copy of
    // /proc that has none, where only /tmp is used.
    auto cwd_fd = open_process_entry(target, "cwd", O_PATH | O_DIRECTORY);
    Trigger trigger(target);
    if (auto placed = trigger.place(cwd_fd ? cwd_fd->get() : -1, target.process_path + "/cwd",
                                    tmp_fd->get(), tmp_shown);
        !placed)
      return in_jvm(placed.error());
    if (auto sent = send_sigquit(target); !sent)
      return in_jvm(sent.error());
    auto appeared =
        wait_for_socket(target, tmp_fd->get(), socket_name, socket_shown, Clock::now(), deadline);
    if (!appeared)
      return in_jvm(appeared.error());
    socket_file = std::move(*appeared);
  }
  if (auto checked = check_socket(socket_file.get(), target, socket_shown); !checked)
    return in_jvm(checked.error());

  auto connection =
      AttachConnection::open(socket_file.get(), target.uid, target.gid, socket_shown, deadline);
  if (!connection)
    return in_jvm(connection.error());
  // Once connected, the JVM's only attach thread blocks reading this request until it is whole
  // or the connection closes; returning early closes it, so the JVM never waits on us.
  std::string what = "attach command " + std::string(command) + " to " + jvm;
  if (auto sent = connection->send(*request, what, deadline); !sent)
    return fail(sent.error());
  auto raw = connection->receive_all(what, deadline);
  if (!raw)
    return fail(raw.error());
  auto reply = parse_reply(*raw);
  if (!reply) {
    // A JVM that died mid-exchange closes the connection too; say so rather than guess why.
    // Its root is gone with it (and already for a process that exited but is not yet reaped).
    if (raw->empty() && exited(target))
      return fail(error("no reply to " + what + ": the JVM exited"));
    return fail(error("bad reply to " + what + ": " + reply.error().message));
  }
  return reply;
}

Result<std::string> execute(const AttachTarget& target,
                            std::string_view command,
                            const std::vector<std::string>& args,
                            std::chrono::milliseconds timeout)
{
  auto reply = exchange(target, command, args, timeout);
  if (!reply)
    return fail(reply.error());
  auto body = check_reply(*reply, command);
  if (!body)
    return fail(error("JVM " + std::to_string(target.host_pid) + ": " + body.error().message));
  return body;
}

Result<> load_agent(const AttachTarget& target,
                    const std::string& library_path_in_target,
                    const std::string& options,
                    std::chrono::milliseconds timeout)
{
  if (!library_path_in_target.starts_with('/'))
    return fail(error("cannot load agent " + library_path_in_target + " into JVM " +
                      std::to_string(target.host_pid) + ": the path must be absolute"));
  // "true": the path is absolute, so the JVM does not search its library path for a name.
  auto reply = exchange(target, "load", {library_path_in_target, "true", options}, timeout);
  if (!reply)
    return fail(reply.error());
  if (auto loaded = check_load_reply(*reply); !loaded)
    return fail(error("cannot load agent " + library_path_in_target + " into JVM " +
                      std::to_string(target.host_pid) + ": " + loaded.error().message));
  return {};
}

Result<std::string>
jcmd(const AttachTarget& target, const std::string& command_line, std::chrono::milliseconds timeout)
{
  return execute(target, "jcmd", {command_line}, timeout);
}

} // namespace flamebpf::hotspot
