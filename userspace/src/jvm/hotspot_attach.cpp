#include "jvm/hotspot_attach.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <ctime>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "common/capabilities.h"
#include "common/contained_file.h"
#include "common/procfs.h"
#include "common/scoped_fs_ids.h"

namespace flamebpf::jvm {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::string_view kReturnCodePrefix = "return code: ";

// The first line of text, with control characters replaced, short enough for a one-line error.
std::string first_line(std::string_view text)
{
  constexpr size_t kMax = 200;
  std::string line;
  for (char c : text.substr(0, text.find('\n'))) {
    if (line.size() == kMax) {
      line += "...";
      break;
    }
    // The reply comes from a process in a container: only printable ASCII reaches the log.
    auto byte = static_cast<unsigned char>(c);
    line += (byte < 0x20 || byte >= 0x7f) ? '?' : c;
  }
  return line;
}

template <class T> bool parse_number(std::string_view text, T& value, int base = 10)
{
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

// Whitespace-separated fields of a status line's value.
std::vector<std::string_view> fields(std::string_view value)
{
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < value.size()) {
    while (i < value.size() && (value[i] == ' ' || value[i] == '\t'))
      ++i;
    size_t start = i;
    while (i < value.size() && value[i] != ' ' && value[i] != '\t')
      ++i;
    if (i > start)
      out.push_back(value.substr(start, i - start));
  }
  return out;
}

// Milliseconds left until deadline, for poll(): never negative.
int remaining_ms(Clock::time_point deadline)
{
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
}

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

// Sends SIGQUIT only to a process that handles it: SIGQUIT's default action kills, so a JVM that
// has not yet installed its handlers, runs with -Xrs, or a non-JVM would die (the JDK's client
// checks SigCgt for the same reason). The signal goes through the process directory, a pidfd
// (Linux 5.3+): if the process exited, the signal fails instead of reaching one that took the pid.
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
  auto text = read_process_file(target, "status", 1 << 16);
  if (!text)
    return gone(text.error());
  auto status = parse_process_status(*text);
  if (!status)
    return fail(
        error("cannot parse " + target.process_path + "/status: " + status.error().message));
  if (!status->catches_sigquit)
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

// Exit codes of the connecting child besides errno values (which are all below 200).
constexpr int kChildSetgroupsFailed = 200;
constexpr int kChildSetgidFailed = 201;
constexpr int kChildSetuidFailed = 202;

int64_t monotonic_ns()
{
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

// connect() on a non-blocking socket, retried while the listener's backlog is full. Only system
// calls: this also runs in a child forked from a multi-threaded process.
int connect_until(int socket_fd, const sockaddr_un& address, int64_t deadline_ns)
{
  for (;;) {
    if (::connect(socket_fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0)
      return 0;
    int error_number = errno;
    if ((error_number != EAGAIN && error_number != EINTR) || monotonic_ns() >= deadline_ns)
      return error_number;
    timespec pause{0, 2'000'000};
    ::nanosleep(&pause, nullptr);
  }
}

// Connects socket_fd to the socket file behind socket_file_fd. The kernel resolves
// /proc/self/fd/<n> to that very inode, never to a path a container could redirect.
//
// HotSpot accepts a peer whose SO_PEERCRED euid/egid equal its own or whose euid is 0, both as
// seen from the JVM's user namespace. Host root is 0 only when the JVM shares the host's user
// namespace, so when flamebpf's ids differ from the JVM's, a child process takes the JVM's ids
// (SO_PEERCRED records the connecting task's credentials) and connects the shared socket; the
// credentials of flamebpf itself never change.
Result<> connect_socket(int socket_fd,
                        int socket_file_fd,
                        const AttachTarget& target,
                        const std::string& shown,
                        Clock::time_point deadline)
{
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::string path = "/proc/self/fd/" + std::to_string(socket_file_fd);
  std::copy(path.begin(), path.end(), address.sun_path);
  int64_t deadline_ns = monotonic_ns() + int64_t{remaining_ms(deadline)} * 1'000'000;

  auto connect_error = [&](int error_number) {
    return system_error(error_number, "cannot connect to " + shown);
  };
  if (::geteuid() == target.uid && ::getegid() == target.gid) {
    if (int error_number = connect_until(socket_fd, address, deadline_ns); error_number != 0)
      return fail(connect_error(error_number));
    return {};
  }

  pid_t child = ::fork();
  if (child < 0)
    return fail(system_error(errno, "cannot fork to connect to " + shown));
  if (child == 0) {
    // Raw system calls: glibc's wrappers would try to change the ids of the parent's threads.
    if (::syscall(SYS_setgroups, 0, nullptr) != 0)
      ::_exit(kChildSetgroupsFailed);
    if (::syscall(SYS_setresgid, target.gid, target.gid, target.gid) != 0)
      ::_exit(kChildSetgidFailed);
    if (::syscall(SYS_setresuid, target.uid, target.uid, target.uid) != 0)
      ::_exit(kChildSetuidFailed);
    ::_exit(std::min(connect_until(socket_fd, address, deadline_ns), kChildSetgroupsFailed - 1));
  }
  // The child only makes non-blocking system calls; the slack covers its exit.
  auto give_up = deadline + std::chrono::milliseconds(100);
  int wait_status = 0;
  for (;;) {
    pid_t done = ::waitpid(child, &wait_status, WNOHANG);
    if (done == child)
      break;
    if (done < 0 && errno != EINTR)
      return fail(system_error(errno, "cannot wait for the child connecting to " + shown));
    if (Clock::now() >= give_up) {
      ::kill(child, SIGKILL);
      ::waitpid(child, &wait_status, 0);
      return fail(error("cannot connect to " + shown + ": the connecting child hung"));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  int code = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
  std::string ids = std::to_string(target.uid) + ":" + std::to_string(target.gid);
  switch (code) {
  case 0:
    return {};
  case kChildSetgroupsFailed:
  case kChildSetgidFailed:
  case kChildSetuidFailed:
    return fail(error("cannot connect to " + shown + ": cannot switch to the JVM's uid:gid " + ids +
                      caps::setid_hint()));
  case -1:
    return fail(error("cannot connect to " + shown + ": the connecting child was killed"));
  default:
    return fail(connect_error(code));
  }
}

Result<>
send_all(int socket_fd, std::string_view data, const std::string& what, Clock::time_point deadline)
{
  while (!data.empty()) {
    ssize_t n = ::send(socket_fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
      return fail(error("cannot send " + what +
                        ": the JVM closed the connection (it refused "
                        "the client's credentials)"));
    if (n < 0 && errno != EAGAIN && errno != EINTR)
      return fail(system_error(errno, "cannot send " + what));
    pollfd waiting{socket_fd, POLLOUT, 0};
    int ready = ::poll(&waiting, 1, remaining_ms(deadline));
    if (ready < 0 && errno != EINTR)
      return fail(system_error(errno, "cannot send " + what));
    if (ready == 0)
      return fail(error("cannot send " + what + ": the JVM took no data before the timeout"));
  }
  return {};
}

// Everything the JVM sends until it closes the connection.
Result<std::string> receive_all(int socket_fd, const std::string& what, Clock::time_point deadline)
{
  std::string data;
  char buffer[65536];
  for (;;) {
    ssize_t n = ::recv(socket_fd, buffer, sizeof buffer, MSG_DONTWAIT);
    // A reset is the JVM closing with our request unread: the end of what it will send.
    if (n == 0 || (n < 0 && errno == ECONNRESET))
      return data;
    if (n > 0) {
      data.append(buffer, static_cast<size_t>(n));
      if (data.size() > kMaxReplyBytes)
        return fail(error("cannot read the reply to " + what + ": larger than " +
                          std::to_string(kMaxReplyBytes) + " bytes"));
      continue;
    }
    if (errno != EAGAIN && errno != EINTR)
      return fail(system_error(errno, "cannot read the reply to " + what));
    pollfd waiting{socket_fd, POLLIN, 0};
    int ready = ::poll(&waiting, 1, remaining_ms(deadline));
    if (ready < 0 && errno != EINTR)
      return fail(system_error(errno, "cannot read the reply to " + what));
    if (ready == 0)
      return fail(error("no complete reply to " + what + " before the timeout (" +
                        std::to_string(data.size()) + " bytes received)"));
  }
}

} // namespace

Result<ProcessStatus> parse_process_status(std::string_view text)
{
  ProcessStatus status;
  bool have_uid = false;
  bool have_gid = false;
  uint64_t caught = 0;
  uint64_t ignored = 0;
  while (!text.empty()) {
    size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos)
      continue;
    std::string_view key = line.substr(0, colon);
    auto values = fields(line.substr(colon + 1));
    if (key == "NSpid") {
      uint32_t pid = 0;
      if (values.empty() || !parse_number(values.back(), pid))
        return fail(error("malformed NSpid line '" + first_line(line) + "'"));
      status.ns_pid = pid;
    } else if (key == "Uid" || key == "Gid") {
      uint32_t id = 0;
      if (values.size() < 2 || !parse_number(values[1], id))
        return fail(error("malformed " + std::string(key) + " line '" + first_line(line) + "'"));
      (key == "Uid" ? status.euid : status.egid) = id;
      (key == "Uid" ? have_uid : have_gid) = true;
    } else if (key == "SigCgt" || key == "SigIgn") {
      uint64_t mask = 0;
      if (values.size() != 1 || !parse_number(values[0], mask, 16))
        return fail(error("malformed " + std::string(key) + " line '" + first_line(line) + "'"));
      (key == "SigCgt" ? caught : ignored) = mask;
    }
  }
  if (!have_uid || !have_gid)
    return fail(error("no Uid: or Gid: line"));
  uint64_t quit_bit = uint64_t{1} << (SIGQUIT - 1);
  status.catches_sigquit = (caught & quit_bit) != 0 && (ignored & quit_bit) == 0;
  return status;
}

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
  auto text = read_process_file(target, "status", 1 << 16);
  if (!text)
    return fail(text.error());
  auto status = parse_process_status(*text);
  if (!status)
    return fail(
        error("cannot parse " + target.process_path + "/status: " + status.error().message));
  target.ns_pid = status->ns_pid.value_or(host_pid);
  target.uid = status->euid;
  target.gid = status->egid;
  target.catches_sigquit = status->catches_sigquit;
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

Result<std::string> encode_request(std::string_view command, const std::vector<std::string>& args)
{
  if (command.empty() || command.size() > kMaxCommandBytes ||
      command.find('\0') != std::string_view::npos)
    return fail(error("invalid attach command '" + first_line(command) + "': needs 1 to " +
                      std::to_string(kMaxCommandBytes) + " bytes and no NUL"));
  if (args.size() > kArgumentCount)
    return fail(error("attach command " + std::string(command) + " has " +
                      std::to_string(args.size()) + " arguments; the protocol carries at most " +
                      std::to_string(kArgumentCount)));
  std::string request = "1";
  request += '\0';
  request += command;
  request += '\0';
  for (size_t i = 0; i < kArgumentCount; ++i) {
    std::string_view arg = i < args.size() ? std::string_view(args[i]) : std::string_view();
    if (arg.size() > kMaxArgumentBytes || arg.find('\0') != std::string_view::npos)
      return fail(error("argument " + std::to_string(i) + " of attach command " +
                        std::string(command) + " is invalid: needs at most " +
                        std::to_string(kMaxArgumentBytes) + " bytes and no NUL"));
    request += arg;
    request += '\0';
  }
  return request;
}

Result<Reply> parse_reply(std::string_view raw)
{
  if (raw.empty())
    return fail(error("the JVM closed the connection without a reply (it refused the client's "
                      "credentials or the request)"));
  size_t newline = raw.find('\n');
  if (newline == std::string_view::npos)
    return fail(error("truncated reply '" + first_line(raw) + "': no complete status line"));
  Reply reply;
  if (!parse_number(raw.substr(0, newline), reply.status))
    return fail(error("malformed reply: status line '" + first_line(raw) + "' is not a number"));
  reply.body = std::string(raw.substr(newline + 1));
  return reply;
}

Result<std::string> check_reply(const Reply& reply, std::string_view command)
{
  if (reply.status == 0)
    return reply.body;
  if (reply.status == kStatusBadVersion)
    return fail(error("the JVM refused attach command " + std::string(command) +
                      ": protocol version mismatch"));
  std::string detail = first_line(reply.body);
  return fail(error("attach command " + std::string(command) + " failed (status " +
                    std::to_string(reply.status) + ")" + (detail.empty() ? "" : ": " + detail)));
}

Result<> check_load_reply(const Reply& reply)
{
  std::string_view body = reply.body;
  std::string_view line = body.substr(0, body.find('\n'));
  int code = 0;
  bool prefixed = line.starts_with(kReturnCodePrefix);
  if (prefixed || parse_number(line, code)) {
    std::string_view number = prefixed ? line.substr(kReturnCodePrefix.size()) : line;
    while (!number.empty() && (number.back() == '\r' || number.back() == ' '))
      number.remove_suffix(1);
    if (!parse_number(number, code))
      return fail(error("malformed reply to load: '" + first_line(line) + "'"));
    if (code != 0)
      return fail(
          error("the agent's Agent_OnAttach failed with return code " + std::to_string(code)));
    if (reply.status != 0)
      return fail(error("the JVM reported status " + std::to_string(reply.status)));
    return {};
  }
  if (body.empty())
    return fail(error("the JVM could not load it (status " + std::to_string(reply.status) +
                      ") and gave no reason"));
  // "<library> was not loaded." then dlerror()'s text on the next line: both say why.
  std::string why = first_line(body);
  std::string_view rest = body.substr(std::min(body.size(), line.size() + 1));
  if (!rest.empty() && !first_line(rest).empty())
    why += " " + first_line(rest);
  return fail(error("the JVM could not load it: " + why));
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

  UniqueFd connection(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!connection.valid())
    return in_jvm(system_error(errno, "cannot create a UNIX socket"));
  if (auto connected =
          connect_socket(connection.get(), socket_file.get(), target, socket_shown, deadline);
      !connected)
    return in_jvm(connected.error());
  // Once connected, the JVM's only attach thread blocks reading this request until it is whole
  // or the connection closes; returning early closes it, so the JVM never waits on us.
  std::string what = "attach command " + std::string(command) + " to " + jvm;
  if (auto sent = send_all(connection.get(), *request, what, deadline); !sent)
    return fail(sent.error());
  auto raw = receive_all(connection.get(), what, deadline);
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

} // namespace flamebpf::jvm
