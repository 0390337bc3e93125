#include "container_harness.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <functional>
#include <gtest/gtest.h>
#include <initializer_list>
#include <map>
#include <optional>
#include <poll.h>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "common/procfs.h"
#include "harness.h"
#include "process.h"
#include "wait.h"

#ifndef BURNER_JAVA_SOURCE
#error "define BURNER_JAVA_SOURCE as the path of tests/progs/Burner.java (tests/CMakeLists.txt)"
#endif

namespace flamebpf::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto kReadyTimeout = 20s;
constexpr auto kClientTimeout = 60s;
constexpr auto kExitTimeout = 15s;
// A work directory without an owner file may be one that another test process is creating.
constexpr auto kOwnerlessGrace = 60s;
constexpr const char* kBurnerImageTag = "flamebpf-burner:latest";
constexpr const char* kPodmanBurnerImage = "localhost/flamebpf-burner:latest";
// podman's default rlimits (1048576) exceed the hard limits of hosts without CAP_SYS_RESOURCE;
// nproc must also stay below conmon's own limit.
constexpr std::array<const char*, 4> kPodmanUlimits{"--ulimit", "nofile=1024:1024", "--ulimit",
                                                    "nproc=4096:4096"};
// podman's cgroupfs manager puts containers and their conmons below this unless --cgroup-parent.
constexpr const char* kPodmanCgroupParent = "/libpod_parent";
constexpr const char* kImagePath =
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
// kContainerJavaHome/bin first, as in the eclipse-temurin images.
constexpr const char* kJavaImagePath =
    "PATH=/opt/java/openjdk/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
// Directories dockerd and containerd create outside their roots: plugin discovery and shim
// sockets. Parents come first.
constexpr std::array<const char*, 4> kHostRuntimeDirs{"/run/docker", "/run/docker/plugins",
                                                      "/run/containerd", "/run/containerd/s"};

void warn(const std::string& message)
{
  std::fprintf(stderr, "container harness: %s\n", message.c_str());
}

std::string trim(std::string_view text)
{
  auto begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos)
    return "";
  auto end = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(begin, end - begin + 1));
}

std::vector<std::string> split_words(const std::string& text)
{
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string word; in >> word;)
    words.push_back(word);
  return words;
}

std::string join(const std::vector<std::string>& words)
{
  std::string joined;
  for (const auto& word : words)
    joined += (joined.empty() ? "" : " ") + word;
  return joined;
}

std::string tail(const std::string& text, size_t bytes)
{
  return text.size() <= bytes ? text : "..." + text.substr(text.size() - bytes);
}

std::string system_message(const std::string& what)
{
  return what + ": " + std::strerror(errno);
}

void write_file(const std::string& path, const std::string& text)
{
  std::ofstream out(path, std::ios::trunc);
  out << text;
  if (!out.flush())
    throw std::runtime_error("cannot write " + path);
}

// The caller's environment for a child, minus DOCKER_* and CONTAINERS_* (DOCKER_HOST,
// CONTAINERS_CONF... would redirect the client, the daemon or podman), with the distribution's
// directories first on PATH (dockerd finds containerd, the shim and runc there), plus extra.
std::vector<std::string> child_environment(const std::vector<std::string>& extra)
{
  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string_view variable(*entry);
    if (!variable.starts_with("DOCKER_") && !variable.starts_with("CONTAINERS_") &&
        !variable.starts_with("PATH="))
      environment.emplace_back(variable);
  }
  const char* path = std::getenv("PATH");
  environment.push_back(std::string("PATH=/usr/sbin:/usr/bin:/sbin:/bin") +
                        (path != nullptr ? std::string(":") + path : ""));
  environment.insert(environment.end(), extra.begin(), extra.end());
  return environment;
}

// preferred if it is executable, else name found on PATH (or the standard directories).
std::string find_executable(const std::string& preferred,
                            const std::string& name,
                            const std::string& package = "docker.io")
{
  if (::access(preferred.c_str(), X_OK) == 0)
    return preferred;
  const char* path = std::getenv("PATH");
  std::string directories =
      std::string(path != nullptr ? path : "") + ":/usr/sbin:/usr/bin:/sbin:/bin";
  std::istringstream in(directories);
  for (std::string directory; std::getline(in, directory, ':');) {
    std::string candidate = directory + "/" + name;
    if (!directory.empty() && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
  }
  throw std::runtime_error(name + " not found (is " + package + " installed?)");
}

// The options of a child with the given environment, reading input (-1: /dev/null).
SpawnOptions with_environment(std::vector<std::string> environment, int input = -1)
{
  SpawnOptions options;
  options.environment = std::move(environment);
  options.input = input;
  return options;
}

// --- processes ---

// The fields of /proc/<pid>/stat after the command name: [0] is the state (field 3 of proc(5)).
std::vector<std::string> stat_fields(pid_t pid)
{
  std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  auto name_end = stat.rfind(')');
  if (name_end == std::string::npos)
    return {};
  return split_words(stat.substr(name_end + 1));
}

// Start time in clock ticks after boot (field 22), which tells a pid's reuse from its first owner.
std::string start_time(pid_t pid)
{
  auto fields = stat_fields(pid);
  return fields.size() > 19 ? fields[19] : "";
}

std::vector<pid_t> all_pids()
{
  std::vector<pid_t> pids;
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator("/proc", ignored)) {
    const std::string name = entry.path().filename().string();
    if (!name.empty() &&
        std::ranges::all_of(name, [](unsigned char c) { return std::isdigit(c) != 0; }))
      pids.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return pids;
}

// True if text names path itself or something below it (not merely a longer name).
bool mentions(std::string_view text, std::string_view path)
{
  for (auto at = text.find(path); at != std::string_view::npos; at = text.find(path, at + 1)) {
    auto end = at + path.size();
    if (end == text.size() || text[end] == '/' || text[end] == '\0')
      return true;
  }
  return false;
}

bool alive_and_mentions(pid_t pid, const std::string& path)
{
  return process_alive(pid) &&
         mentions(read_text("/proc/" + std::to_string(pid) + "/cmdline"), path);
}

// Waits up to timeout until none of pids runs, reaping those that are children of ours.
bool wait_gone(const std::vector<pid_t>& pids, Clock::duration timeout)
{
  return poll_until(
      [&] {
        bool any = false;
        for (pid_t pid : pids) {
          ::waitpid(pid, nullptr, WNOHANG);
          any = any || process_alive(pid);
        }
        return !any;
      },
      timeout);
}

// roots and every process descending from them.
std::vector<pid_t> with_descendants(const std::vector<pid_t>& roots)
{
  std::multimap<pid_t, pid_t> children;
  for (pid_t pid : all_pids()) {
    auto fields = stat_fields(pid);
    if (fields.size() > 1)
      children.emplace(static_cast<pid_t>(std::stol(fields[1])), pid);
  }
  std::set<pid_t> seen(roots.begin(), roots.end());
  std::vector<pid_t> pending(roots.begin(), roots.end());
  while (!pending.empty()) {
    pid_t parent = pending.back();
    pending.pop_back();
    auto [begin, end] = children.equal_range(parent);
    for (auto it = begin; it != end; ++it) {
      if (seen.insert(it->second).second)
        pending.push_back(it->second);
    }
  }
  return {seen.begin(), seen.end()};
}

// --- mounts and cgroups ---

std::vector<procfs::MountEntry> current_mounts()
{
  return procfs::parse_mountinfo(read_text("/proc/self/mountinfo"));
}

// Mount points at or below dir, deepest first.
std::vector<std::string> mounts_below(const std::string& dir)
{
  std::vector<std::string> below;
  for (const auto& mount : current_mounts()) {
    if (mount.mount_point == dir || mount.mount_point.starts_with(dir + "/"))
      below.push_back(mount.mount_point);
  }
  std::ranges::sort(below,
                    [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  return below;
}

void unmount_below(const std::string& dir)
{
  // Stacked mounts need one pass each; lazy unmounts succeed even while something still uses them.
  for (int pass = 0; pass < 10; ++pass) {
    auto below = mounts_below(dir);
    if (below.empty())
      return;
    for (const auto& mount_point : below)
      ::umount2(mount_point.c_str(), MNT_DETACH);
  }
}

std::vector<procfs::MountEntry> cgroup_mounts()
{
  std::vector<procfs::MountEntry> mounts;
  for (auto& mount : current_mounts()) {
    if (mount.fs_type == "cgroup" || mount.fs_type == "cgroup2")
      mounts.push_back(std::move(mount));
  }
  return mounts;
}

// The directory of a cgroup path (as /proc/<pid>/cgroup shows it) in one mounted hierarchy, or ""
// if that mount does not show it.
std::string cgroup_dir(const procfs::MountEntry& mount, const std::string& path)
{
  if (path.empty() || path == "/")
    return "";
  if (mount.root == "/")
    return mount.mount_point + path;
  if (path.starts_with(mount.root + "/"))
    return mount.mount_point + path.substr(mount.root.size());
  return "";
}

std::vector<pid_t> cgroup_members(const std::string& dir)
{
  std::vector<pid_t> pids;
  for (const auto& word : split_words(read_text(dir + "/cgroup.procs")))
    pids.push_back(static_cast<pid_t>(std::stol(word)));
  return pids;
}

// Removes a cgroup directory and its children, deepest first, killing what still runs in them.
void remove_cgroup_tree(const std::string& dir)
{
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator(dir, ignored)) {
    if (entry.is_directory(ignored) && !entry.is_symlink(ignored))
      remove_cgroup_tree(entry.path().string());
  }
  // A cgroup stays busy for a moment after its last process died.
  for (int attempt = 0; attempt < 100; ++attempt) {
    for (pid_t pid : cgroup_members(dir))
      ::kill(pid, SIGKILL);
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT)
      return;
    if (errno != EBUSY)
      break;
    std::this_thread::sleep_for(20ms);
  }
  warn(system_message("cannot remove cgroup " + dir));
}

size_t depth(const std::string& path)
{
  return static_cast<size_t>(std::ranges::count(path, '/'));
}

// What tells one runtime's work directories, and the leftovers they account for, from another's.
struct WorkDirKind {
  std::string_view prefix;          // kDockerWorkDirPrefix or kPodmanWorkDirPrefix
  std::string_view container_store; // below the work directory: one directory per container id
  std::string_view cgroup_prefix;   // a container's cgroup is <parent>/<cgroup_prefix><id>
  // containerd's socket below the work directory, and the namespace of its containers, whose shims
  // leave sockets named after them; "" if no containerd runs from the work directory.
  std::string_view containerd_socket;
  std::string_view containerd_namespace;
};

constexpr WorkDirKind kDockerKind{kDockerWorkDirPrefix, "data/containers", "",
                                  "exec/containerd/containerd.sock", "moby"};
constexpr WorkDirKind kPodmanKind{kPodmanWorkDirPrefix, "storage/overlay-containers", "libpod-", "",
                                  ""};
constexpr WorkDirKind kCriKind{kCriWorkDirPrefix, "state/io.containerd.runtime.v2.task/k8s.io", "",
                               "containerd.sock", "k8s.io"};

// What a work directory's record says may need cleaning up.
struct CleanupRecord {
  std::set<std::string> parents;    // cgroup parents (relative cgroup paths)
  std::set<std::string> containers; // container cgroups (relative cgroup paths)
  std::set<std::string> shared;     // cgroups others may use too, such as podman's conmon cgroup
  std::set<std::string> host_dirs;  // host directories that did not exist before the runtime
  std::set<std::string> ids;        // container ids
};

bool is_container_id(const std::string& text)
{
  return text.size() == 64 && text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

CleanupRecord read_record(const std::string& dir, const WorkDirKind& kind)
{
  CleanupRecord record;
  std::istringstream in(read_text(dir + "/cleanup"));
  for (std::string type, value; in >> type >> value;) {
    if (type == "parent") {
      record.parents.insert(value);
    } else if (type == "container") {
      record.containers.insert(value);
      std::string leaf = fs::path(value).filename().string();
      if (leaf.starts_with(kind.cgroup_prefix))
        record.ids.insert(leaf.substr(kind.cgroup_prefix.size()));
    } else if (type == "shared") {
      record.shared.insert(value);
    } else if (type == "hostdir") {
      record.host_dirs.insert(value);
    }
  }
  // Containers whose cgroup was never recorded (a crash right after the run) are still listed in
  // the runtime's store.
  std::error_code ignored;
  for (const auto& entry :
       fs::directory_iterator(dir + "/" + std::string(kind.container_store), ignored)) {
    std::string name = entry.path().filename().string();
    if (is_container_id(name) && entry.is_directory(ignored))
      record.ids.insert(name);
  }
  for (const auto& id : record.ids) {
    for (const auto& parent : record.parents)
      record.containers.insert((parent == "/" ? "" : parent) + "/" +
                               std::string(kind.cgroup_prefix) + id);
  }
  return record;
}

std::string sha256_hex(const std::string& text)
{
  // Small enough to fit the pipe's buffer, so it can be written before sha256sum starts.
  Pipe input = make_pipe();
  if (::write(input.write_end.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    throw std::runtime_error(system_message("cannot write to a pipe"));
  input.write_end.reset();
  auto result = run_process({find_executable("/usr/bin/sha256sum", "sha256sum", "coreutils")},
                            with_environment(child_environment({}), input.read_end.get()), 10s);
  auto words = split_words(result.out);
  if (result.status != 0 || words.empty())
    throw std::runtime_error("sha256sum failed: " + trim(result.err));
  return words[0];
}

// The sockets of killed shims stay behind in containerd's fixed socket directory. A shim's
// socket is named after sha256(<containerd address>/<namespace>/<container id>) (containerd 1.6
// runtime/v2/shim SocketAddress).
void remove_shim_sockets(const std::string& dir,
                         const WorkDirKind& kind,
                         const std::set<std::string>& ids)
{
  for (const auto& id : ids) {
    std::string socket = std::string("/run/containerd/s/") +
                         sha256_hex(dir + "/" + std::string(kind.containerd_socket) + "/" +
                                    std::string(kind.containerd_namespace) + "/" + id);
    if (fs::is_socket(fs::symlink_status(socket)))
      ::unlink(socket.c_str());
  }
}

// Removes a cgroup directory if nothing runs in it. A cgroup stays busy for a moment after its
// last process died, so that is retried briefly; one that others still use is left alone.
void remove_if_empty(const std::string& dir)
{
  for (int attempt = 0; attempt < 50; ++attempt) {
    if (::rmdir(dir.c_str()) == 0 || errno != EBUSY)
      return;
    std::error_code ignored;
    bool has_children = false;
    for (const auto& entry : fs::directory_iterator(dir, ignored))
      has_children = has_children || (entry.is_directory(ignored) && !entry.is_symlink(ignored));
    if (has_children || !cgroup_members(dir).empty())
      return;
    std::this_thread::sleep_for(20ms);
  }
}

// Removes the cgroups of these relative paths, and their ancestors, deepest first, in every
// hierarchy, each only if nothing runs in it.
void remove_empty_cgroups(std::initializer_list<const std::set<std::string>*> groups,
                          const std::vector<procfs::MountEntry>& hierarchies)
{
  std::set<std::string> ancestors;
  for (const auto* group : groups) {
    for (const auto& path : *group) {
      for (fs::path up(path); up.has_relative_path(); up = up.parent_path())
        ancestors.insert(up.string());
    }
  }
  std::vector<std::string> ordered(ancestors.begin(), ancestors.end());
  std::ranges::sort(ordered,
                    [](const std::string& a, const std::string& b) { return depth(a) > depth(b); });
  for (const auto& path : ordered) {
    for (const auto& mount : hierarchies) {
      std::string cgroup = cgroup_dir(mount, path);
      if (!cgroup.empty())
        remove_if_empty(cgroup);
    }
  }
}

// Removes everything a runtime with this work directory may have left on the host: its processes
// (dockerd, containerd, shims, conmons, podman and runc, containers), mounts, cgroup directories
// and the directory itself. Works from the directory alone, so that it serves a crashed run as
// well as a clean shutdown.
void purge_work_dir(const std::string& dir, const WorkDirKind& kind) noexcept
{
  try {
    CleanupRecord record = read_record(dir, kind);
    auto hierarchies = cgroup_mounts();

    // The daemons, shims, conmons and runtimes name the work directory in their command lines;
    // the containers' processes descend from the shims or conmons, or failing that still sit in
    // the containers' cgroups.
    for (int round = 0; round < 3; ++round) {
      std::vector<pid_t> victims = with_descendants(processes_mentioning(dir));
      for (const auto& container : record.containers) {
        for (const auto& mount : hierarchies) {
          std::string cgroup = cgroup_dir(mount, container);
          if (!cgroup.empty()) {
            auto members = cgroup_members(cgroup);
            victims.insert(victims.end(), members.begin(), members.end());
          }
        }
      }
      std::erase(victims, ::getpid());
      if (victims.empty())
        break;
      for (pid_t pid : victims)
        ::kill(pid, SIGKILL);
      if (!wait_gone(victims, 10s))
        warn("processes of " + dir + " survive SIGKILL");
    }

    unmount_below(dir);
    if (!kind.containerd_socket.empty())
      remove_shim_sockets(dir, kind, record.ids);

    for (const auto& container : record.containers) {
      for (const auto& mount : hierarchies) {
        std::string cgroup = cgroup_dir(mount, container);
        if (!cgroup.empty() && fs::exists(cgroup))
          remove_cgroup_tree(cgroup);
      }
    }
    // Parents (the default /docker or /libpod_parent, or --cgroup-parent chains) and shared
    // cgroups go only if empty: another runtime may have containers there too.
    remove_empty_cgroups({&record.parents, &record.containers, &record.shared}, hierarchies);

    std::vector<std::string> host_dirs(record.host_dirs.begin(), record.host_dirs.end());
    std::ranges::sort(
        host_dirs, [](const std::string& a, const std::string& b) { return depth(a) > depth(b); });
    for (const auto& host_dir : host_dirs)
      ::rmdir(host_dir.c_str()); // only if empty: another containerd may use it by now

    // remove_all would descend into anything still mounted below and delete its files.
    if (auto left = mounts_below(dir); !left.empty()) {
      warn("not removing " + dir + ": " + left.front() + " is still mounted");
      return;
    }
    std::error_code error;
    fs::remove_all(dir, error);
    if (error)
      warn("cannot remove " + dir + ": " + error.message());
  } catch (const std::exception& e) {
    warn("cleaning up " + dir + " failed: " + e.what());
  } catch (...) {
    warn("cleaning up " + dir + " failed");
  }
}

std::string boot_id()
{
  return trim(read_text("/proc/sys/kernel/random/boot_id"));
}

// The owner line of a work directory: the test process's pid, start time and boot.
std::string owner_line(pid_t pid)
{
  return std::to_string(pid) + " " + start_time(pid) + " " + boot_id() + "\n";
}

// True if the test process that made dir still runs (this one included).
bool owner_alive(const std::string& dir)
{
  auto words = split_words(read_text(dir + "/owner"));
  if (words.size() != 3) {
    std::error_code error;
    auto modified = fs::last_write_time(dir, error);
    return !error && fs::file_time_type::clock::now() - modified < kOwnerlessGrace;
  }
  pid_t pid = static_cast<pid_t>(std::stol(words[0]));
  return process_alive(pid) && owner_line(pid) == words[0] + " " + words[1] + " " + words[2] + "\n";
}

// Cleans up after earlier test runs of this kind that could not: their owner process is gone.
void purge_stale_work_dirs(const WorkDirKind& kind)
{
  fs::path prefix(kind.prefix);
  std::string name_prefix = prefix.filename().string();
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator(prefix.parent_path(), ignored)) {
    if (!entry.path().filename().string().starts_with(name_prefix) || entry.is_symlink(ignored) ||
        !entry.is_directory(ignored))
      continue;
    std::string dir = entry.path().string();
    try {
      if (owner_alive(dir))
        continue;
    } catch (const std::exception&) {
      // An unreadable owner file is as good as none.
    }
    warn("cleaning up " + dir + ", left behind by an earlier test run");
    purge_work_dir(dir, kind);
  }
}

// Cleans up after killed runs of this kind, then creates a fresh work directory that names its
// owner, this process.
std::string create_work_dir(const WorkDirKind& kind)
{
  purge_stale_work_dirs(kind);
  // Canonical, so that it compares equal to the mount points in mountinfo.
  fs::path prefix(kind.prefix);
  std::string pattern =
      (fs::canonical(prefix.parent_path()) / prefix.filename()).string() + "XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr)
    throw std::runtime_error(system_message("cannot create " + pattern));
  try {
    // First of all, so that a concurrent purge_stale_work_dirs() knows the directory is in use.
    write_file(pattern + "/owner", owner_line(::getpid()));
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(pattern, ignored);
    throw;
  }
  return pattern;
}

// Appends a line to a work directory's record of what needs cleaning up.
void append_record(const std::string& work_dir, const std::string& type, const std::string& value)
{
  std::ofstream out(work_dir + "/cleanup", std::ios::app);
  out << type << ' ' << value << '\n';
  if (!out.flush())
    throw std::runtime_error("cannot write " + work_dir + "/cleanup");
}

// Copies the host file at path into rootfs at the same path. Each symlink met on the way, in a
// directory or the file itself, is recreated as it is and then followed on the host side, so the
// copy lands on a resolved path and writing never follows a link out of rootfs.
void install_host_file(const fs::path& rootfs, const fs::path& path)
{
  fs::path resolved = "/";
  std::vector<fs::path> pending; // components still to walk, the next one last
  for (const auto& component : path.relative_path())
    pending.insert(pending.begin(), component);
  for (int links = 0; !pending.empty();) {
    fs::path component = pending.back();
    pending.pop_back();
    if (component == "." || component.empty())
      continue;
    if (component == "..") {
      resolved = resolved.parent_path();
      continue;
    }
    fs::path host = resolved / component;
    fs::path inside = rootfs / host.relative_path();
    if (fs::is_symlink(fs::symlink_status(host))) {
      if (++links > 40)
        throw std::runtime_error("too many symlinks resolving " + path.string());
      fs::path link = fs::read_symlink(host);
      if (!fs::exists(fs::symlink_status(inside)))
        fs::create_symlink(link, inside);
      if (link.is_absolute())
        resolved = "/";
      fs::path rest = link.relative_path();
      std::vector<fs::path> components(rest.begin(), rest.end());
      pending.insert(pending.end(), components.rbegin(), components.rend());
    } else if (pending.empty()) {
      if (!fs::exists(fs::symlink_status(inside)))
        fs::copy_file(host, inside);
    } else {
      fs::create_directory(inside);
      resolved = host;
    }
  }
}

// The host's shared libraries (and the dynamic loader) that programs need, from one ldd run.
// Libraries found below bundled (the image's own, such as a JDK's) are left out, and so are
// missing ones bundled provides: JDK libraries need libjvm.so, which is found at run time as the
// already loaded one.
std::set<std::string> shared_libraries(const std::vector<std::string>& programs,
                                       const fs::path& bundled = {})
{
  std::vector<std::string> argv{find_executable("/usr/bin/ldd", "ldd")};
  argv.insert(argv.end(), programs.begin(), programs.end());
  auto result = run_process(argv, with_environment(child_environment({})), 60s);
  // Static programs make ldd fail, but it still lists the others.
  if (result.status != 0 &&
      (result.out + result.err).find("not a dynamic executable") == std::string::npos)
    throw std::runtime_error("ldd " + join(programs) + " failed: " + trim(result.err));
  std::set<std::string> bundled_names;
  std::error_code ignored;
  if (!bundled.empty()) {
    for (const auto& entry : fs::recursive_directory_iterator(bundled, ignored))
      bundled_names.insert(entry.path().filename().string());
  }
  std::set<std::string> libraries;
  std::string program = programs.empty() ? "" : programs.front();
  std::istringstream in(result.out);
  for (std::string line; std::getline(in, line);) {
    // With several programs, each one's list starts with a line "<program>:".
    if (!line.starts_with("\t") && line.ends_with(":")) {
      program = line.substr(0, line.size() - 1);
      continue;
    }
    auto words = split_words(line);
    if (line.find("not found") != std::string::npos) {
      if (!words.empty() && bundled_names.contains(words[0]))
        continue;
      throw std::runtime_error("ldd " + program + ": " + trim(line));
    }
    auto path = std::ranges::find_if(words, [](const auto& word) { return word.starts_with("/"); });
    if (path != words.end() && (bundled.empty() || !mentions(*path, bundled.string())))
      libraries.insert(*path);
  }
  return libraries;
}

// True if path is an ELF file (an executable or a shared library).
bool is_elf(const fs::path& path)
{
  constexpr std::string_view kMagic("\177ELF", 4);
  std::array<char, 4> magic{};
  std::ifstream in(path, std::ios::binary);
  return in.read(magic.data(), magic.size()) && std::string_view(magic.data(), 4) == kMagic;
}

// Copies host files into rootfs at their host paths, with the host libraries that they, the
// programs in users, and the ELF files below bundled (already inside rootfs) need.
void install_with_libraries(const fs::path& rootfs,
                            const std::vector<std::string>& files,
                            std::vector<std::string> users,
                            const fs::path& bundled = {})
{
  std::set<std::string> installed(files.begin(), files.end());
  for (const auto& file : files)
    users.push_back(fs::canonical(file).string());
  if (!bundled.empty()) {
    for (const auto& entry : fs::recursive_directory_iterator(bundled)) {
      if (entry.is_regular_file() && !entry.is_symlink() && is_elf(entry.path()))
        users.push_back(entry.path().string());
    }
  }
  installed.merge(shared_libraries(users, bundled));
  for (const auto& file : installed)
    install_host_file(rootfs, file);
}

// The start of every image: the usual top-level directories, a world-writable /tmp (mode 1777),
// and a root user.
void build_base_rootfs(const fs::path& rootfs)
{
  fs::create_directories(rootfs / "usr/bin");
  for (const char* dir : {"etc", "tmp", "proc", "sys", "dev", "root"})
    fs::create_directories(rootfs / dir);
  fs::permissions(rootfs / "tmp", fs::perms::all | fs::perms::sticky_bit);
  write_file((rootfs / "etc/passwd").string(), "root:x:0:0:root:/root:/bin/sh\n");
  write_file((rootfs / "etc/group").string(), "root:x:0:\n");
}

std::string host_sleep()
{
  return fs::exists("/bin/sleep") ? "/bin/sleep" : "/usr/bin/sleep";
}

// Fills rootfs with the burner workload as /usr/bin/<name> for each name in kBurnerNames, /bin/sh,
// /bin/sleep, the shared libraries they need, and a root user.
void build_burner_rootfs(const fs::path& rootfs)
{
  build_base_rootfs(rootfs);
  for (auto name : kBurnerNames)
    copy_burner((rootfs / "usr/bin").string(), std::string(name));
  install_with_libraries(rootfs, {"/bin/sh", host_sleep()}, {BURNER_BINARY});
}

// What java_image() packages for each version.
struct JdkSpec {
  std::string_view home;           // the host JDK
  std::string_view tag;            // the image
  std::string_view shell_less_tag; // the image with JavaImageTools::kNone
};

JdkSpec jdk_spec(JavaVersion version)
{
  switch (version) {
  case JavaVersion::kJdk17:
    return {"/usr/lib/jvm/java-17-openjdk-amd64", "flamebpf-jdk17:latest",
            "flamebpf-jdk17-noshell:latest"};
  case JavaVersion::kJdk25:
    return {"/usr/lib/jvm/temurin-25-jdk-amd64", "flamebpf-jdk25:latest",
            "flamebpf-jdk25-noshell:latest"};
  }
  throw std::invalid_argument("unknown JavaVersion");
}

// The class files of tests/progs/Burner.java (name -> contents), compiled by JDK 17's javac
// --release 17, for both images' JVMs. Compiled from the source once per process, so that every
// image holds the current source and later daemons need not wait for javac again.
const std::map<std::string, std::string>& burner_java_classes()
{
  static const std::map<std::string, std::string> classes = [] {
    std::string javac =
        find_executable(std::string(jdk_spec(JavaVersion::kJdk17).home) + "/bin/javac", "javac",
                        "openjdk-17-jdk-headless");
    TempDir dir;
    auto result = run_process({javac, "--release", "17", "-d", dir.path(), BURNER_JAVA_SOURCE},
                              with_environment(child_environment({})), 120s);
    if (result.status != 0)
      throw std::runtime_error("javac " + std::string(BURNER_JAVA_SOURCE) +
                               " failed: " + trim(result.out + result.err));
    std::map<std::string, std::string> files;
    for (const auto& entry : fs::directory_iterator(dir.path()))
      files[entry.path().filename().string()] = read_text(entry.path().string());
    return files;
  }();
  return classes;
}

// Fills rootfs with a Java runtime jlink'ed from the host JDK at /opt/java/openjdk, the host
// libraries it needs, the tools (/bin/sh, /bin/sleep, /bin/cat unless JavaImageTools::kNone),
// Burner's classes at /app, and the users root and app (kContainerAppUid, also its gid).
void build_java_rootfs(const fs::path& rootfs, JavaVersion version, JavaImageTools tools)
{
  build_base_rootfs(rootfs);
  fs::path java_home = rootfs / fs::path(kContainerJavaHome).relative_path();
  fs::create_directories(java_home.parent_path());
  std::string jlink = std::string(jdk_spec(version).home) + "/bin/jlink";
  if (::access(jlink.c_str(), X_OK) != 0)
    throw std::runtime_error(jlink + " not found (is the JDK installed?)");
  // JDK 24 and later link from their own run-time image when they have no jmods.
  auto result = run_process({jlink, "--add-modules",
                             "java.base,java.management,jdk.management,jdk.attach,jdk.jcmd",
                             "--no-header-files", "--no-man-pages", "--output", java_home.string()},
                            with_environment(child_environment({})), 300s);
  if (result.status != 0)
    throw std::runtime_error(jlink + " failed: " + trim(result.out + result.err));
  std::vector<std::string> tools_installed;
  if (tools == JavaImageTools::kShellSleepAndCat)
    tools_installed = {"/bin/sh", host_sleep(),
                       fs::exists("/bin/cat") ? "/bin/cat" : "/usr/bin/cat"};
  install_with_libraries(rootfs, tools_installed, {}, java_home);

  fs::path app = rootfs / fs::path(kContainerAppDir).relative_path();
  fs::create_directories(app);
  for (const auto& [name, contents] : burner_java_classes())
    write_file((app / name).string(), contents);
  fs::path home = rootfs / "home/app";
  fs::create_directories(home);
  if (::chown(home.c_str(), kContainerAppUid, kContainerAppUid) != 0)
    throw std::runtime_error(system_message("cannot chown " + home.string()));
  std::string id = std::to_string(kContainerAppUid);
  // A distroless image's users have no shell to log in with.
  std::string shell = tools == JavaImageTools::kNone ? "/sbin/nologin" : "/bin/sh";
  write_file((rootfs / "etc/passwd").string(), "root:x:0:0:root:/root:" + shell + "\napp:x:" + id +
                                                   ":" + id + ":app:/home/app:" + shell + "\n");
  write_file((rootfs / "etc/group").string(), "root:x:0:\napp:x:" + id + ":\n");
}

// Builds a rootfs in work_dir with build and feeds it as a tar archive to import, which reads it
// from the file descriptor it is given (tar -C rootfs -c . | <import> -).
void import_rootfs(const std::string& work_dir,
                   const std::function<void(const fs::path&)>& build,
                   const std::function<void(int)>& import)
{
  fs::path rootfs = work_dir + "/rootfs";
  fs::remove_all(rootfs); // what a failed build left
  build(rootfs);
  Pipe archive = make_pipe();
  std::string tar_log = work_dir + "/tar.log";
  pid_t tar = -1;
  {
    UniqueFd log = open_output_file(tar_log);
    SpawnOptions options = with_environment(child_environment({}));
    options.output = archive.write_end.get();
    options.error_output = log.get();
    tar = spawn({find_executable("/usr/bin/tar", "tar", "tar"), "-C", rootfs.string(), "-c", "."},
                options);
  }
  archive.write_end.reset(); // the importer sees the end of the archive when tar exits
  try {
    import(archive.read_end.get());
  } catch (...) {
    ::kill(tar, SIGKILL);
    wait_child(tar, 5s);
    throw;
  }
  archive.read_end.reset();
  if (auto status = wait_child(tar, 60s); status != 0) {
    ::kill(tar, SIGKILL);
    wait_child(tar, 5s);
    throw std::runtime_error("tar of " + rootfs.string() + " failed: " + read_text(tar_log));
  }
  fs::remove_all(rootfs);
}

// The trimmed stdout of a client run, or std::runtime_error naming the command and its stderr.
std::string client_output(const std::string& tool,
                          const std::vector<std::string>& args,
                          const ProcessOutput& result)
{
  if (result.status != 0) {
    std::string how =
        result.status < 0 ? "timed out" : "exit code " + std::to_string(result.status);
    throw std::runtime_error(tool + " " + join(args) + " failed (" + how +
                             "): " + trim(result.err));
  }
  return trim(result.out);
}

// Runs the client of a container runtime with args; returns its trimmed stdout or throws.
using Client = std::function<std::string(const std::vector<std::string>&)>;

// Waits until the container's main process runs, then fills in its pid and cgroup2 directory.
// Docker and podman understand the same inspect and logs commands. Returns every cgroup path the
// process has (as /proc/<pid>/cgroup shows them), for the cleanup record.
std::set<std::string> wait_until_running(Container& container, const Client& client)
{
  auto deadline = Clock::now() + 20s;
  for (;;) {
    auto state = split_words(client({"inspect", "--type", "container", "-f",
                                     "{{.State.Pid}} {{.State.Status}}", container.id}));
    pid_t pid = state.empty() ? 0 : static_cast<pid_t>(std::stol(state[0]));
    if (pid > 0 && process_alive(pid)) {
      container.pid = pid;
      break;
    }
    std::string status = state.size() > 1 ? state[1] : "?";
    if (status == "exited" || status == "dead" || status == "stopped" || Clock::now() >= deadline) {
      std::string logs;
      try {
        logs = client({"logs", container.id});
      } catch (const std::exception& e) {
        logs = e.what();
      }
      throw std::runtime_error("container " + container.name + " does not run (" + status +
                               "): " + logs);
    }
    std::this_thread::sleep_for(20ms);
  }

  // Lines are "hierarchy-id:controllers:path"; cgroup2's is "0::path".
  std::istringstream lines(read_text("/proc/" + std::to_string(container.pid) + "/cgroup"));
  std::set<std::string> paths;
  for (std::string line; std::getline(lines, line);) {
    auto first = line.find(':');
    auto second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos)
      continue;
    std::string path = line.substr(second + 1);
    paths.insert(path);
    if (line.starts_with("0::"))
      container.cgroup2_path = cgroup2_mount() + path;
  }
  return paths;
}

// Called once the paths wait_until_running() returned are recorded.
void require_cgroup2(const Container& container)
{
  if (container.cgroup2_path.empty())
    throw std::runtime_error("container " + container.name + " (pid " +
                             std::to_string(container.pid) + ") has no cgroup2 path");
}

// Waits until a removed container is neither listed by the runtime nor running.
void wait_until_removed(const std::string& name, pid_t pid, const Client& client)
{
  auto deadline = Clock::now() + 20s;
  for (;;) {
    bool listed = true;
    try {
      client({"inspect", "--type", "container", name});
    } catch (const std::runtime_error&) {
      listed = false;
    }
    if (!listed && !process_alive(pid))
      return;
    if (Clock::now() >= deadline)
      throw std::runtime_error("container " + name + " is still there 20 s after its removal");
    std::this_thread::sleep_for(20ms);
  }
}

// The value of --cgroup-parent among run options, or fallback.
std::string cgroup_parent(const std::vector<std::string>& options, const std::string& fallback)
{
  std::string parent = fallback;
  for (size_t i = 0; i < options.size(); ++i) {
    if (options[i].starts_with("--cgroup-parent="))
      parent = options[i].substr(std::strlen("--cgroup-parent="));
    else if (options[i] == "--cgroup-parent" && i + 1 < options.size())
      parent = options[i + 1];
  }
  return parent.starts_with("/") ? parent : "/" + parent;
}

} // namespace

ContainersRemovedAtEnd::ContainersRemovedAtEnd(ContainerRuntime& runtime)
    : remove_([&runtime] { runtime.remove_containers(); })
{
}

ContainersRemovedAtEnd::ContainersRemovedAtEnd(CriContainerd& containerd)
    : remove_([&containerd] { containerd.remove_pods(); })
{
}

ContainersRemovedAtEnd::~ContainersRemovedAtEnd()
{
  try {
    remove_();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "cannot remove the test's containers: " << e.what();
  }
}

std::vector<std::string> cgroup_mount_points()
{
  std::vector<std::string> points;
  for (const auto& mount : cgroup_mounts())
    points.push_back(mount.mount_point);
  return points;
}

bool process_alive(pid_t pid)
{
  if (pid <= 0)
    return false;
  auto fields = stat_fields(pid);
  return !fields.empty() && fields[0] != "Z" && fields[0] != "X";
}

std::vector<pid_t> processes_mentioning(const std::string& path)
{
  std::vector<pid_t> pids;
  for (pid_t pid : all_pids()) {
    if (pid != ::getpid() && mentions(read_text("/proc/" + std::to_string(pid) + "/cmdline"), path))
      pids.push_back(pid);
  }
  return pids;
}

std::string host_jdk_home(JavaVersion version)
{
  return std::string(jdk_spec(version).home);
}

bool jdk25_available()
{
  // Without jmods, jlink links from the run-time image (lib/modules).
  std::string home = host_jdk_home(JavaVersion::kJdk25);
  return ::access((home + "/bin/jlink").c_str(), X_OK) == 0 &&
         (fs::exists(home + "/jmods") || fs::exists(home + "/lib/modules"));
}

ContainerRuntime::ContainerRuntime(std::string work_dir, Traits traits)
    : work_dir_(std::move(work_dir)), traits_(std::move(traits))
{
}

void ContainerRuntime::record(const std::string& kind, const std::string& value)
{
  append_record(work_dir_, kind, value);
}

ContainerRuntime::Container ContainerRuntime::run(const std::string& name,
                                                  const std::vector<std::string>& options,
                                                  const std::string& image,
                                                  const std::vector<std::string>& command)
{
  // Recorded before the run, so that a crash right after it still finds the cgroups.
  std::string parent = cgroup_parent(options, traits_.default_cgroup_parent);
  record("parent", parent);
  if (!traits_.shared_cgroup.empty())
    record("shared", (parent == "/" ? "" : parent) + "/" + traits_.shared_cgroup);

  // --pull=never: a mistyped image must fail here, not be looked up in a registry.
  std::vector<std::string> args{"run", "-d", "--pull=never", "--name", name, "--network=none"};
  args.insert(args.end(), traits_.run_options.begin(), traits_.run_options.end());
  args.insert(args.end(), options.begin(), options.end());
  args.push_back(image);
  args.insert(args.end(), command.begin(), command.end());
  std::string output = client(args);
  Container container{name, output.substr(output.find_last_of('\n') + 1), 0, ""};
  auto paths =
      wait_until_running(container, [&](const auto& client_args) { return client(client_args); });
  container_pids_.emplace_back(name, container.pid);
  for (const auto& path : paths) {
    record("container", path);
    record("parent", fs::path(path).parent_path().string());
  }
  require_cgroup2(container);
  return container;
}

void ContainerRuntime::remove(const std::string& name)
{
  pid_t pid = 0;
  for (const auto& [known, known_pid] : container_pids_) {
    if (known == name)
      pid = known_pid;
  }
  std::vector<std::string> args{"rm"};
  args.insert(args.end(), traits_.remove_options.begin(), traits_.remove_options.end());
  args.push_back(name);
  client(args);
  wait_until_removed(name, pid, [&](const auto& client_args) { return client(client_args); });
  std::erase_if(container_pids_, [&](const auto& entry) { return entry.first == name; });
}

void ContainerRuntime::remove_containers()
{
  auto ids = split_words(client({"ps", "-aq"}));
  if (!ids.empty()) {
    std::vector<std::string> args{"rm"};
    args.insert(args.end(), traits_.remove_options.begin(), traits_.remove_options.end());
    args.insert(args.end(), ids.begin(), ids.end());
    client(args);
  }
  for (const auto& [name, pid] : container_pids_)
    wait_until_removed(name, pid, [&](const auto& client_args) { return client(client_args); });
  container_pids_.clear();
}

DockerDaemon& DockerDaemon::shared()
{
  static DockerDaemon daemon;
  return daemon;
}

DockerDaemon::DockerDaemon()
    : ContainerRuntime(create_work_dir(kDockerKind),
                       {.default_cgroup_parent = "/docker",
                        .run_options = {},
                        .remove_options = {"-f", "-v"},
                        .shared_cgroup = ""})
{
  try {
    data_root_ = work_dir_ + "/data";
    exec_root_ = work_dir_ + "/exec";
    socket_ = work_dir_ + "/docker.sock";
    client_ = find_executable("/usr/bin/docker", "docker");
    // The client's own config (contexts, credential helpers) stays out of ~/.docker.
    client_environment_ = child_environment({"DOCKER_CONFIG=" + work_dir_ + "/client"});
    for (const char* host_dir : kHostRuntimeDirs) {
      if (!fs::exists(host_dir))
        record("hostdir", host_dir);
    }
    // dockerd 20.10 would otherwise create /etc/docker/key.json on the host.
    write_file(work_dir_ + "/daemon.json",
               "{\"deprecated-key-path\": \"" + work_dir_ + "/key.json\"}\n");

    std::vector<std::string> argv{find_executable("/usr/sbin/dockerd", "dockerd"),
                                  "--data-root=" + data_root_,
                                  "--exec-root=" + exec_root_,
                                  "--pidfile=" + work_dir_ + "/dockerd.pid",
                                  "--host=unix://" + socket_,
                                  "--config-file=" + work_dir_ + "/daemon.json"};
    // Docker's own cgroup paths (/docker/<id>), even on systemd hosts.
    argv.emplace_back("--exec-opt=native.cgroupdriver=cgroupfs");
    // Off the host's network: no docker0 bridge, no NAT rules.
    for (const char* flag :
         {"--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-masq=false"})
      argv.emplace_back(flag);
    std::string log_path = work_dir_ + "/dockerd.log";
    {
      UniqueFd log = open_output_file(log_path);
      SpawnOptions options = with_environment(child_environment({}));
      options.output = log.get();
      options.error_output = log.get();
      // Its own session: a terminal's signals to the test do not reach it, and it outlives a
      // killed test (the next run cleans up).
      options.new_session = true;
      dockerd_pid_ = spawn(argv, options);
    }

    auto deadline = Clock::now() + kReadyTimeout;
    for (;;) {
      if (!process_alive(dockerd_pid_))
        throw std::runtime_error("dockerd exited during startup: " +
                                 tail(read_text(log_path), 3000));
      std::vector<std::string> version{client_,   "-H",       "unix://" + socket_,
                                       "version", "--format", "{{.Server.Version}}"};
      auto result = run_process(version, with_environment(client_environment_), 5s);
      if (result.status == 0)
        break;
      if (Clock::now() >= deadline)
        throw std::runtime_error("dockerd did not answer within 20 s (" + trim(result.err) +
                                 "): " + tail(read_text(log_path), 3000));
      std::this_thread::sleep_for(50ms);
    }

    auto containerd = split_words(read_text(exec_root_ + "/containerd/containerd.pid"));
    if (!containerd.empty() && alive_and_mentions(std::stoi(containerd[0]), work_dir_))
      containerd_pid_ = std::stoi(containerd[0]);
    else
      warn("cannot find the containerd of dockerd " + std::to_string(dockerd_pid_));
  } catch (...) {
    shut_down();
    throw;
  }
}

DockerDaemon::~DockerDaemon()
{
  shut_down();
}

void DockerDaemon::shut_down() noexcept
{
  try {
    if (process_alive(dockerd_pid_)) {
      // Through dockerd first, so that dockerd and runc undo their own mounts, network namespaces
      // and cgroups; purge_work_dir() below only mops up.
      try {
        auto containers = split_words(docker({"ps", "-aq"}));
        if (!containers.empty()) {
          std::vector<std::string> args{"rm", "-f", "-v"};
          args.insert(args.end(), containers.begin(), containers.end());
          docker(args);
        }
        auto images = split_words(docker({"images", "-aq"}));
        std::ranges::sort(images);
        images.erase(std::unique(images.begin(), images.end()), images.end());
        if (!images.empty()) {
          std::vector<std::string> args{"rmi", "-f"};
          args.insert(args.end(), images.begin(), images.end());
          docker(args);
        }
      } catch (const std::exception& e) {
        warn(std::string("removing containers and images failed: ") + e.what());
      }
      ::kill(dockerd_pid_, SIGTERM);
    }
    if (dockerd_pid_ > 0 && !wait_child(dockerd_pid_, kExitTimeout)) {
      warn("dockerd " + std::to_string(dockerd_pid_) + " ignores SIGTERM; killing it");
      ::kill(dockerd_pid_, SIGKILL);
      wait_child(dockerd_pid_, 5s);
    }
    // dockerd stops its containerd on the way out.
    poll_until([&] { return !alive_and_mentions(containerd_pid_, work_dir_); }, kExitTimeout);
  } catch (const std::exception& e) {
    warn(std::string("stopping dockerd failed: ") + e.what());
  } catch (...) {
    warn("stopping dockerd failed");
  }
  if (!work_dir_.empty())
    purge_work_dir(work_dir_, kDockerKind);
}

std::string DockerDaemon::run_client(const std::vector<std::string>& args, int input)
{
  std::vector<std::string> argv{client_, "-H", "unix://" + socket_};
  argv.insert(argv.end(), args.begin(), args.end());
  return client_output(
      "docker", args,
      run_process(argv, with_environment(client_environment_, input), kClientTimeout));
}

std::string DockerDaemon::docker(const std::vector<std::string>& args)
{
  return run_client(args, -1);
}

void DockerDaemon::import_image(const std::string& tag,
                                const std::vector<std::string>& changes,
                                const std::function<void(const std::string& rootfs)>& build)
{
  std::vector<std::string> args{"import"};
  for (const auto& change : changes) {
    args.emplace_back("--change");
    args.push_back(change);
  }
  args.emplace_back("-");
  args.push_back(tag);
  import_rootfs(
      work_dir_, [&](const fs::path& rootfs) { build(rootfs.string()); },
      [&](int archive) { run_client(args, archive); });
}

std::string DockerDaemon::burner_image()
{
  if (burner_image_.empty()) {
    import_image(kBurnerImageTag, {std::string("ENV ") + kImagePath},
                 [](const std::string& rootfs) { build_burner_rootfs(rootfs); });
    burner_image_ = kBurnerImageTag;
  }
  return burner_image_;
}

std::string DockerDaemon::java_image(JavaVersion version, JavaImageTools tools)
{
  if (auto known = java_images_.find({version, tools}); known != java_images_.end())
    return known->second;
  JdkSpec spec = jdk_spec(version);
  std::string tag(tools == JavaImageTools::kNone ? spec.shell_less_tag : spec.tag);
  import_image(tag,
               {std::string("ENV ") + kJavaImagePath,
                "ENV JAVA_HOME=" + std::string(kContainerJavaHome),
                "WORKDIR " + std::string(kContainerAppDir)},
               [&](const std::string& rootfs) { build_java_rootfs(rootfs, version, tools); });
  java_images_[{version, tools}] = tag;
  return tag;
}

void DockerDaemon::wait_for_output(const std::string& name,
                                   std::string_view text,
                                   std::chrono::milliseconds timeout)
{
  auto deadline = Clock::now() + timeout;
  for (;;) {
    std::string output = docker({"logs", name});
    if (output.find(text) != std::string::npos)
      return;
    bool running =
        docker({"inspect", "--type", "container", "-f", "{{.State.Running}}", name}) == "true";
    if (!running || Clock::now() >= deadline) {
      // docker logs sends the container's stderr to its own stderr, which docker() drops.
      auto logs = run_process({client_, "-H", "unix://" + socket_, "logs", name},
                              with_environment(client_environment_), kClientTimeout);
      throw std::runtime_error("container " + name +
                               (running ? " did not print " : " stopped before printing ") + "\"" +
                               std::string(text) + "\": " + tail(logs.out + logs.err, 3000));
    }
    std::this_thread::sleep_for(100ms);
  }
}

PodmanRuntime& PodmanRuntime::shared()
{
  static PodmanRuntime podman;
  return podman;
}

PodmanRuntime::PodmanRuntime()
    : ContainerRuntime(create_work_dir(kPodmanKind),
                       {.default_cgroup_parent = kPodmanCgroupParent,
                        .run_options = {kPodmanUlimits.begin(), kPodmanUlimits.end()},
                        .remove_options = {"--force", "--volumes", "--time", "0"},
                        // conmon runs in <parent>/conmon, which podman never removes and other
                        // podmans share.
                        .shared_cgroup = "conmon"})
{
  try {
    podman_ = find_executable("/usr/bin/podman", "podman", "podman");
    std::string runc = find_executable("/usr/sbin/runc", "runc", "runc");
    storage_root_ = work_dir_ + "/storage";
    std::string run_root = work_dir_ + "/run";
    std::string tmp_dir = work_dir_ + "/tmp";
    for (const std::string& dir : {storage_root_, run_root, tmp_dir, work_dir_ + "/runc",
                                   work_dir_ + "/bin", work_dir_ + "/networks"})
      fs::create_directories(dir);

    // runc keeps its state in /run/runc unless told otherwise, and podman 4.3 does not hand
    // --runtime-flag on to conmon's exit command (podman container cleanup), which then cannot
    // find the state and leaves the container's cgroups behind. A wrapper named runc that sets
    // --root holds for every runc podman, conmon and the exit command start.
    std::string runtime = work_dir_ + "/bin/runc";
    write_file(runtime, "#!/bin/sh\nexec '" + runc + "' --root '" + work_dir_ + "/runc' \"$@\"\n");
    fs::permissions(runtime, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);

    // Only these files are read instead of the host's containers.conf, storage.conf and
    // registries.conf. File locks keep podman off the host-wide /dev/shm/libpod_lock.
    auto setting = [](const std::string& key, const std::string& value) {
      return key + " = \"" + value + "\"\n";
    };
    std::ostringstream config;
    config << "[engine]\n"
           << setting("tmp_dir", tmp_dir) << setting("static_dir", storage_root_ + "/libpod")
           << setting("volume_path", storage_root_ + "/volumes")
           << setting("image_copy_tmp_dir", tmp_dir) << setting("lock_type", "file")
           << setting("events_logger", "file")
           << setting("events_logfile_path", tmp_dir + "/events.log")
           << setting("cgroup_manager", "cgroupfs") << "[network]\n"
           << setting("network_config_dir", work_dir_ + "/networks");
    write_file(work_dir_ + "/containers.conf", config.str());
    write_file(work_dir_ + "/storage.conf", "[storage]\n" + setting("driver", "overlay") +
                                                setting("graphroot", storage_root_) +
                                                setting("runroot", run_root));
    // Nothing is ever pulled: images are built locally and run with --pull=never.
    write_file(work_dir_ + "/registries.conf", "unqualified-search-registries = []\n");
    environment_ = child_environment(
        {"CONTAINERS_CONF=" + work_dir_ + "/containers.conf",
         "CONTAINERS_STORAGE_CONF=" + work_dir_ + "/storage.conf",
         "CONTAINERS_REGISTRIES_CONF=" + work_dir_ + "/registries.conf", "TMPDIR=" + tmp_dir});
    global_options_ = {"--root",           storage_root_, "--runroot",        run_root,
                       "--runtime",        runtime,       "--cgroup-manager", "cgroupfs",
                       "--events-backend", "file",        "--tmpdir",         tmp_dir,
                       "--storage-driver", "overlay"};
  } catch (...) {
    shut_down();
    throw;
  }
}

PodmanRuntime::~PodmanRuntime()
{
  shut_down();
}

void PodmanRuntime::shut_down() noexcept
{
  if (work_dir_.empty())
    return;
  try {
    if (!global_options_.empty()) {
      // Through podman first, so that podman and runc undo their own mounts and cgroups;
      // purge_work_dir() below only mops up.
      try {
        podman({"rm", "--all", "--force", "--volumes", "--time", "0"});
        podman({"rmi", "--all", "--force"});
      } catch (const std::exception& e) {
        warn(std::string("removing containers and images failed: ") + e.what());
      }
      // Each conmon ends after its container and runs podman container cleanup.
      poll_until([&] { return processes_mentioning(work_dir_).empty(); }, kExitTimeout);
    }
  } catch (const std::exception& e) {
    warn(std::string("stopping podman containers failed: ") + e.what());
  } catch (...) {
    warn("stopping podman containers failed");
  }
  purge_work_dir(work_dir_, kPodmanKind);
}

std::string PodmanRuntime::podman(const std::vector<std::string>& args)
{
  std::vector<std::string> argv{podman_};
  argv.insert(argv.end(), global_options_.begin(), global_options_.end());
  argv.insert(argv.end(), args.begin(), args.end());
  return client_output("podman", args,
                       run_process(argv, with_environment(environment_), kClientTimeout));
}

std::string PodmanRuntime::burner_image()
{
  if (!burner_image_.empty())
    return burner_image_;
  // containers/image keeps a blob-info cache in /var/lib/containers/cache for root whatever
  // --root says. The import runs in a mount namespace of its own with an empty tmpfs on /var/lib,
  // so the cache lands there and vanishes with it.
  std::string script = "'" + find_executable("/usr/bin/mount", "mount", "mount") +
                       "' -t tmpfs -o mode=0755,size=1m flamebpf-podman /var/lib && exec \"$@\"";
  std::vector<std::string> argv{find_executable("/usr/bin/unshare", "unshare", "util-linux"),
                                "--mount",
                                "--propagation",
                                "private",
                                "/bin/sh",
                                "-c",
                                script,
                                "sh",
                                podman_};
  argv.insert(argv.end(), global_options_.begin(), global_options_.end());
  std::vector<std::string> args{
      "import", "--quiet", "--change", std::string("ENV ") + kImagePath, "-", kPodmanBurnerImage};
  argv.insert(argv.end(), args.begin(), args.end());
  import_rootfs(work_dir_, build_burner_rootfs, [&](int archive) {
    client_output("podman", args,
                  run_process(argv, with_environment(environment_, archive), kClientTimeout));
  });
  burner_image_ = kPodmanBurnerImage;
  return burner_image_;
}

CriContainerd& CriContainerd::shared()
{
  static CriContainerd containerd;
  return containerd;
}

CriContainerd::CriContainerd() : work_dir_(create_work_dir(kCriKind))
{
  try {
    socket_ = work_dir_ + "/containerd.sock";
    state_ = work_dir_ + "/state";
    ctr_ = find_executable("/usr/bin/ctr", "ctr", "containerd");
    for (const char* host_dir : kHostRuntimeDirs) {
      if (!fs::exists(host_dir))
        append_record(work_dir_, "hostdir", host_dir);
    }
    // Everything below the work directory. The CRI plugin itself is off: the tests create
    // containers as it would, and it would open a streaming port and look for CNI.
    write_file(work_dir_ + "/config.toml",
               "version = 2\n"
               "root = \"" +
                   work_dir_ +
                   "/root\"\n"
                   "state = \"" +
                   state_ +
                   "\"\n"
                   "disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n"
                   "[grpc]\n"
                   "  address = \"" +
                   socket_ +
                   "\"\n"
                   "[ttrpc]\n"
                   "  address = \"" +
                   socket_ +
                   ".ttrpc\"\n"
                   "[plugins.\"io.containerd.internal.v1.opt\"]\n"
                   "  path = \"" +
                   work_dir_ + "/opt\"\n");
    std::string log_path = work_dir_ + "/containerd.log";
    {
      UniqueFd log = open_output_file(log_path);
      SpawnOptions options = with_environment(child_environment({}));
      options.output = log.get();
      options.error_output = log.get();
      options.new_session = true;
      containerd_pid_ = spawn({find_executable("/usr/bin/containerd", "containerd", "containerd"),
                               "--config", work_dir_ + "/config.toml"},
                              options);
    }
    auto deadline = Clock::now() + kReadyTimeout;
    for (;;) {
      if (!process_alive(containerd_pid_))
        throw std::runtime_error("containerd exited during startup: " +
                                 tail(read_text(log_path), 3000));
      auto result = run_process({ctr_, "--address", socket_, "version"},
                                with_environment(child_environment({})), 5s);
      if (result.status == 0)
        break;
      if (Clock::now() >= deadline)
        throw std::runtime_error("containerd did not answer within 20 s (" + trim(result.err) +
                                 "): " + tail(read_text(log_path), 3000));
      std::this_thread::sleep_for(50ms);
    }
  } catch (...) {
    shut_down();
    throw;
  }
}

CriContainerd::~CriContainerd()
{
  shut_down();
}

void CriContainerd::shut_down() noexcept
{
  try {
    if (process_alive(containerd_pid_)) {
      for (const auto& [id, pid] : containers_) {
        try {
          stop(id, pid);
        } catch (const std::exception& e) {
          warn("removing container " + id + " failed: " + e.what());
        }
      }
      ::kill(containerd_pid_, SIGTERM);
    }
    if (containerd_pid_ > 0 && !wait_child(containerd_pid_, kExitTimeout)) {
      warn("containerd " + std::to_string(containerd_pid_) + " ignores SIGTERM; killing it");
      ::kill(containerd_pid_, SIGKILL);
      wait_child(containerd_pid_, 5s);
    }
  } catch (const std::exception& e) {
    warn(std::string("stopping containerd failed: ") + e.what());
  } catch (...) {
    warn("stopping containerd failed");
  }
  if (!work_dir_.empty())
    purge_work_dir(work_dir_, kCriKind);
}

std::string CriContainerd::ctr(const std::vector<std::string>& args)
{
  std::vector<std::string> argv{ctr_, "--address", socket_, "--namespace", "k8s.io"};
  argv.insert(argv.end(), args.begin(), args.end());
  return client_output("ctr", args,
                       run_process(argv, with_environment(child_environment({})), kClientTimeout));
}

std::string CriContainerd::burner_rootfs()
{
  if (burner_rootfs_.empty()) {
    std::string rootfs = work_dir_ + "/burner-rootfs";
    build_burner_rootfs(rootfs);
    burner_rootfs_ = rootfs;
  }
  return burner_rootfs_;
}

CriContainerd::Pod CriContainerd::start_pod(const std::string& namespace_name,
                                            const std::string& name,
                                            const std::map<std::string, std::string>& annotations)
{
  std::mt19937_64 random(std::random_device{}());
  std::string uid =
      fmt::format("{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}", random() & 0xffffffff, random() & 0xffff,
                  random() & 0xfff, random() & 0xfff, random() & 0xffffffffffff);
  Pod pod{namespace_name, name, uid, "/kubepods/burstable/pod" + uid, annotations};
  // The pause container: it only holds the pod's namespaces.
  run(pod, "", {"/bin/sleep", "3600"});
  return pod;
}

Container CriContainerd::run(const Pod& pod,
                             const std::string& container_name,
                             const std::vector<std::string>& command,
                             const std::map<std::string, std::string>& annotations)
{
  std::mt19937_64 random(std::random_device{}());
  std::string id;
  for (int i = 0; i < 4; ++i)
    id += fmt::format("{:016x}", random());
  std::string cgroup = pod.cgroup + "/" + id;
  // Recorded before the run, so that a crash right after it still finds the cgroups.
  append_record(work_dir_, "parent", pod.cgroup);
  append_record(work_dir_, "container", cgroup);
  std::map<std::string, std::string> all = {
      {"io.kubernetes.cri.container-type", container_name.empty() ? "sandbox" : "container"},
      {"io.kubernetes.cri.sandbox-namespace", pod.namespace_name},
      {"io.kubernetes.cri.sandbox-name", pod.name},
      {"io.kubernetes.cri.sandbox-uid", pod.uid}};
  if (!container_name.empty())
    all["io.kubernetes.cri.container-name"] = container_name;
  for (const auto& source : {pod.annotations, annotations}) {
    for (const auto& [key, value] : source)
      all[key] = value;
  }
  std::vector<std::string> args{"run", "-d", "--rootfs", "--cgroup", cgroup};
  for (const auto& [key, value] : all) {
    args.emplace_back("--annotation");
    args.push_back(key + "=" + value);
  }
  args.push_back(burner_rootfs());
  args.push_back(id);
  args.insert(args.end(), command.begin(), command.end());
  ctr(args);

  Container container{container_name.empty() ? pod.name + "/POD" : container_name, id, 0, ""};
  std::string pid_file = state_ + "/io.containerd.runtime.v2.task/k8s.io/" + id + "/init.pid";
  auto deadline = Clock::now() + kReadyTimeout;
  for (;;) {
    auto words = split_words(read_text(pid_file));
    if (!words.empty()) {
      container.pid = std::stoi(words[0]);
      std::istringstream lines(read_text("/proc/" + std::to_string(container.pid) + "/cgroup"));
      for (std::string line; std::getline(lines, line);) {
        if (line == "0::" + cgroup)
          container.cgroup2_path = cgroup2_mount() + cgroup;
      }
      if (!container.cgroup2_path.empty())
        break;
    }
    if (Clock::now() >= deadline)
      throw std::runtime_error("container " + id + " of pod " + pod.name +
                               " did not start within 20 s");
    std::this_thread::sleep_for(20ms);
  }
  containers_.emplace_back(id, container.pid);
  return container;
}

void CriContainerd::stop(const std::string& id, pid_t pid)
{
  try {
    ctr({"task", "kill", "--signal", "SIGKILL", id});
  } catch (const std::runtime_error&) {
    // Exited already.
  }
  if (!poll_until([&] { return !process_alive(pid); }, 10s))
    throw std::runtime_error("container " + id + " survives SIGKILL");
  // The task is reaped by its shim a moment after its process dies.
  poll_until(
      [&] {
        try {
          ctr({"task", "delete", id});
          return true;
        } catch (const std::runtime_error&) {
          return false;
        }
      },
      10s);
  ctr({"container", "delete", id});
}

void CriContainerd::remove_pods()
{
  for (const auto& [id, pid] : containers_)
    stop(id, pid);
  containers_.clear();
  CleanupRecord record = read_record(work_dir_, kCriKind);
  auto hierarchies = cgroup_mounts();
  for (const auto& container : record.containers) {
    for (const auto& mount : hierarchies) {
      std::string dir = cgroup_dir(mount, container);
      if (!dir.empty() && fs::exists(dir))
        remove_cgroup_tree(dir);
    }
  }
  remove_empty_cgroups({&record.parents, &record.containers}, hierarchies);
}

void CriContainerd::remove_pod(const Pod& pod)
{
  for (auto it = containers_.begin(); it != containers_.end();) {
    std::string cgroup = pod.cgroup + "/" + it->first;
    bool ours = fs::exists(cgroup2_mount() + cgroup);
    if (!ours) {
      ++it;
      continue;
    }
    stop(it->first, it->second);
    for (const auto& mount : cgroup_mounts()) {
      std::string dir = cgroup_dir(mount, cgroup);
      if (!dir.empty() && fs::exists(dir))
        remove_cgroup_tree(dir);
    }
    it = containers_.erase(it);
  }
  for (const auto& mount : cgroup_mounts()) {
    std::string dir = cgroup_dir(mount, pod.cgroup);
    if (!dir.empty() && fs::exists(dir))
      remove_if_empty(dir);
  }
}

} // namespace flamebpf::testing
