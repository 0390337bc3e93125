// The JVM attach against a container whose users are hostile to it: real JVMs (Burner) in real
// Docker containers, run as the image's user app, and another user of the same container
// (docker exec --user) or the container's root planting files where flamebpf and its agent put
// theirs: a hard link to a root-owned file at the attach trigger, another user's files at the
// agent's, trigger's and socket's names, device nodes there, and another user's (huge) perf map.
// flamebpf must change none of those files, open none of them, and still name the JVM's Java
// frames, or say in one line who keeps it from doing so.
#include <functional>
#include <sys/sysmacros.h>

#include "hostile_harness.h"
#include "runtimes/hotspot/agent_installer.h"
#include "runtimes/hotspot/agent_library.h"

namespace flamebpf::testing {
namespace {

// The hot chain of tests/progs/Burner.java as flamebpf names it, root to leaf.
constexpr const char* kJavaChain = "Burner.run_[j];Burner.a_[j];Burner.b_[j];Burner.c_[j]";
// A user of the containers other than root and the JVM's (app).
constexpr int kCoTenantUid = 2000;

// The name flamebpf gives its agent in a container (it embeds the library this test links).
std::string agent_name()
{
  return hotspot::agent_file_name(hotspot::agent_library());
}

struct FileState {
  uid_t uid = 0;
  gid_t gid = 0;
  mode_t mode = 0; // with the type bits
  nlink_t links = 0;
  std::string content; // of a regular file
};

FileState state_of(const std::string& path)
{
  struct stat status {};
  EXPECT_EQ(::lstat(path.c_str(), &status), 0) << path << ": " << std::strerror(errno);
  return {status.st_uid, status.st_gid, status.st_mode, status.st_nlink,
          S_ISREG(status.st_mode) ? read_text(path) : ""};
}

void expect_same(const FileState& before, const FileState& after, const std::string& what)
{
  EXPECT_EQ(after.uid, before.uid) << what;
  EXPECT_EQ(after.gid, before.gid) << what;
  EXPECT_EQ(after.mode, before.mode) << what;
  EXPECT_EQ(after.links, before.links) << what;
  EXPECT_EQ(after.content, before.content) << what;
}

// Names in a directory (no recursion, links not followed).
std::vector<std::string> names_in(const std::string& dir)
{
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir))
    names.push_back(entry.path().filename().string());
  return names;
}

class HostileAttachTest : public HostileContainerTest {
protected:
  using Prepare = std::function<void(const DockerDaemon::Container&)>;

  // The JVMs of these tests run as app, in app's home (a working directory it may write, as most
  // services have), unless options say otherwise.
  static std::vector<std::string> as_app()
  {
    return {"--user", std::to_string(kContainerAppUid), "--workdir", "/home/app"};
  }

  // Runs Burner with frame pointers as the main process (pid 1) of container name, warm. prepare
  // runs before the JVM starts (the container's shell waits for it, then becomes the JVM), so
  // that what it plants is there before any profiler on the host could attach to the JVM.
  DockerDaemon::Container run_burner(const std::string& name,
                                     const std::vector<std::string>& options,
                                     const Prepare& prepare,
                                     JavaVersion version = JavaVersion::kJdk17)
  {
    std::string java = std::string(kContainerJavaHome) +
                       "/bin/java -XX:+PreserveFramePointer -cp " + std::string(kContainerAppDir) +
                       " Burner 60";
    auto jvm = docker_.run(
        name, options, docker_.java_image(version),
        {"/bin/sh", "-c", "while [ ! -e /tmp/.start ]; do sleep 0.05; done; exec " + java});
    prepare(jvm);
    as_user(name, 0, ": > /tmp/.start");
    docker_.wait_for_output(name, "burner ready");
    return jvm;
  }

  // Runs a shell command in the container as uid.
  void as_user(const std::string& container, int uid, const std::string& command)
  {
    docker_.docker({"exec", "--user", std::to_string(uid), container, "/bin/sh", "-c", command});
  }

  static std::string root_of(const DockerDaemon::Container& container)
  {
    return "/proc/" + std::to_string(container.pid) + "/root";
  }

  // flamebpf on the containers for seconds.
  Measured profile(const std::vector<std::string>& containers, int seconds)
  {
    profiled_ = containers;
    std::vector<std::string> args;
    for (const auto& name : containers)
      args.insert(args.end(), {"--cgroup", name});
    args.insert(args.end(),
                {"-d", std::to_string(seconds), "-o", dir_.path().string() + "/out.folded"});
    return run_measured(args, dir_.path());
  }

  // The profile of a container: out.folded, or out.<name>.folded when several were profiled.
  std::map<std::string, uint64_t> stacks_of(const std::string& container)
  {
    std::string file = profiled_.size() == 1 ? "/out.folded" : "/out." + container + ".folded";
    std::string folded = read_text(dir_.path().string() + file);
    EXPECT_EQ(folded_problems(folded), "") << container;
    return parse_folded(folded);
  }

  // Most of the JVM's samples go through Burner's Java chain, named. The lower bound on samples
  // only rules out a profile of (almost) nothing: on a busy machine a JVM gets less than a CPU.
  void expect_java_named(const std::string& container, const Measured& run)
  {
    auto stacks = stacks_of(container);
    uint64_t java = count_with_prefix(stacks, "java;");
    uint64_t chain = count_containing(stacks, kJavaChain);
    EXPECT_GT(java, 50u) << container << "\n" << describe(run);
    EXPECT_GE(chain * 100, java * 50) << container << ": " << hottest_stacks(stacks, 3) << "\n"
                                      << describe(run);
    std::printf("[ FIGURES  ] %s: %llu java samples, %.1f%% through Burner.run;a;b;c\n",
                container.c_str(), static_cast<unsigned long long>(java),
                100.0 * static_cast<double>(chain) /
                    static_cast<double>(std::max<uint64_t>(java, 1)));
  }

  // The one line of flamebpf's log about the JVM of container.
  static std::string line_about(const DockerDaemon::Container& container, const Measured& run)
  {
    auto lines = lines_with(run.log, "JVM " + std::to_string(container.pid) + " ");
    EXPECT_EQ(lines.size(), 1u) << run.log;
    return lines.empty() ? "" : lines[0];
  }

  std::vector<std::string> profiled_;
};

// The trigger's name, /tmp/.attach_pid1, is a hard link to a root-owned file (a copy of the
// container's /etc/shadow). HotSpot would take it for a trigger; flamebpf must neither use nor
// change it (it once chowned it to the JVM's user), and attaches through the JVM's working
// directory, where HotSpot looks first.
TEST_F(HostileAttachTest, HardLinkAtTheTriggerKeepsItsOwnerAndModeAndTheJvmIsNamed)
{
  std::map<std::string, FileState> before;
  auto plant = [&](const DockerDaemon::Container& jvm) {
    std::string shadow = root_of(jvm) + "/etc/shadow-copy";
    std::ofstream(shadow) << "root:$6$salt$hash:19000:0:99999:7:::\n";
    ASSERT_EQ(::chown(shadow.c_str(), 0, 0), 0);
    ASSERT_EQ(::chmod(shadow.c_str(), 0640), 0);
    ASSERT_EQ(::link(shadow.c_str(), (root_of(jvm) + "/tmp/.attach_pid1").c_str()), 0)
        << std::strerror(errno);
    before[jvm.name] = state_of(shadow);
  };
  std::vector<DockerDaemon::Container> jvms{run_burner("ha-link-17", as_app(), plant)};
  if (jdk25_available())
    jvms.push_back(run_burner("ha-link-25", as_app(), plant, JavaVersion::kJdk25));

  std::vector<std::string> names;
  for (const auto& jvm : jvms)
    names.push_back(jvm.name);
  auto run = profile(names, 4);
  print_figures("hard link at the attach trigger", run);
  expect_prompt(run, 4);
  for (const auto& jvm : jvms) {
    expect_same(before[jvm.name], state_of(root_of(jvm) + "/etc/shadow-copy"), jvm.name);
    EXPECT_NE(line_about(jvm, run).find("loaded flamebpf's agent"), std::string::npos) << run.log;
    expect_java_named(jvm.name, run);
    // The trigger flamebpf made in the working directory is gone again.
    EXPECT_FALSE(fs::exists(root_of(jvm) + "/home/app/.attach_pid1"));
  }
}

// Another user of the container takes the agent's name (a file of other content) and the
// trigger's: the agent goes under a fresh name, the trigger into the working directory, and their
// files stay as they were.
TEST_F(HostileAttachTest, CoTenantHoldingTheAgentAndTriggerNamesCannotDenyTheAttach)
{
  std::string agent = agent_name();
  auto jvm = run_burner("ha-squat", as_app(), [&](const DockerDaemon::Container&) {
    as_user("ha-squat", kCoTenantUid,
            "echo squatter > /tmp/" + agent + " && echo squatter > /tmp/.attach_pid1");
  });
  std::string tmp = root_of(jvm) + "/tmp";
  auto agent_before = state_of(tmp + "/" + agent);
  auto trigger_before = state_of(tmp + "/.attach_pid1");
  ASSERT_EQ(agent_before.uid, static_cast<uid_t>(kCoTenantUid));

  auto run = profile({"ha-squat"}, 4);
  print_figures("agent and trigger names held by another user", run);
  expect_prompt(run, 4);
  expect_same(agent_before, state_of(tmp + "/" + agent), agent);
  expect_same(trigger_before, state_of(tmp + "/.attach_pid1"), ".attach_pid1");
  std::string line = line_about(jvm, run);
  EXPECT_NE(line.find("loaded flamebpf's agent"), std::string::npos) << run.log;
  EXPECT_NE(line.find("held by uid " + std::to_string(kCoTenantUid)), std::string::npos) << line;
  expect_java_named("ha-squat", run);
  // The agent under its fresh name was removed once loaded; the JVM keeps it mapped.
  std::string stem = agent.substr(0, agent.size() - 3) + "-";
  for (const auto& name : names_in(tmp))
    EXPECT_FALSE(name.starts_with(stem)) << name;
}

// The container's root (Docker grants it CAP_MKNOD) makes the agent's name a device node (of
// /dev/zero: any device's driver would run on an open, a watchdog's would arm it) and the
// trigger's a FIFO: flamebpf never opens either.
TEST_F(HostileAttachTest, DeviceNodeAndFifoAtTheAgentAndTriggerNamesAreNeverOpened)
{
  std::string agent = agent_name();
  auto jvm = run_burner("ha-device", as_app(), [&](const DockerDaemon::Container& container) {
    std::string tmp = root_of(container) + "/tmp/";
    ASSERT_EQ(::mknod((tmp + agent).c_str(), S_IFCHR | 0666, ::makedev(1, 5)), 0)
        << std::strerror(errno);
    ASSERT_EQ(::mkfifo((tmp + ".attach_pid1").c_str(), 0666), 0) << std::strerror(errno);
  });
  std::string tmp = root_of(jvm) + "/tmp";
  const std::vector<std::string> planted{agent, ".attach_pid1"};
  AccessWatch watch({tmp});

  auto run = profile({"ha-device"}, 4);
  auto events = watch.events();
  print_figures("device node and FIFO at the agent's and trigger's names", run);
  expect_prompt(run, 4);
  for (const auto& name : planted)
    EXPECT_EQ(std::count(events.begin(), events.end(), tmp + "/" + name + ": open"), 0) << name;
  EXPECT_NE(line_about(jvm, run).find("loaded flamebpf's agent"), std::string::npos) << run.log;
  expect_java_named("ha-device", run);
  // Both open for real (an open shows up as above), and are still what was planted.
  for (const auto& name : planted) {
    int fd = ::open((tmp + "/" + name).c_str(), O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    EXPECT_GE(fd, 0) << name << ": " << std::strerror(errno);
    if (fd >= 0)
      ::close(fd);
  }
  auto own_opens = watch.events();
  EXPECT_EQ(std::count(own_opens.begin(), own_opens.end(), tmp + "/" + agent + ": open"), 1);
  EXPECT_TRUE(S_ISCHR(state_of(tmp + "/" + agent).mode));
  EXPECT_TRUE(S_ISFIFO(state_of(tmp + "/.attach_pid1").mode));
}

// Another user made the JVM's perf map first: a sparse 8 MiB file naming every address. The agent
// of a JVM running as root replaces it by a map of its own, never appending to it or reading it.
TEST_F(HostileAttachTest, PerfMapOfAnotherUserIsReplacedNeverAppendedToOrRead)
{
  auto jvm = run_burner("ha-map", {}, [&](const DockerDaemon::Container& container) {
    as_user("ha-map", kCoTenantUid, "echo '0 7fffffffffff Squatter.everything' > /tmp/perf-1.map");
    fs::resize_file(root_of(container) + "/tmp/perf-1.map", uint64_t{8} << 20);
  });
  std::string map = root_of(jvm) + "/tmp/perf-1.map";

  auto run = profile({"ha-map"}, 4);
  print_figures("perf map of another user", run);
  expect_prompt(run, 4);
  auto after = state_of(map);
  EXPECT_EQ(after.uid, 0u) << "the map is not the agent's own";
  EXPECT_LT(after.content.size(), size_t{4} << 20);
  EXPECT_EQ(after.content.find("Squatter"), std::string::npos);
  EXPECT_EQ(after.content.find('\0'), std::string::npos);
  EXPECT_EQ(count_containing(stacks_of("ha-map"), "Squatter"), 0u);
  expect_java_named("ha-map", run);
}

// The same with a JVM of another user than the map's: in the sticky /tmp it cannot replace it,
// and flamebpf says who holds it.
TEST_F(HostileAttachTest, PerfMapThatTheJvmsUserCannotReplaceIsNamedInOneLine)
{
  auto jvm = run_burner("ha-map-app", as_app(), [&](const DockerDaemon::Container&) {
    as_user("ha-map-app", kCoTenantUid,
            "echo '0 7fffffffffff Squatter.everything' > /tmp/perf-1.map");
  });
  std::string map = root_of(jvm) + "/tmp/perf-1.map";
  auto before = state_of(map);

  auto run = profile({"ha-map-app"}, 3);
  print_figures("perf map the JVM's user cannot replace", run);
  expect_prompt(run, 3);
  expect_same(before, state_of(map), map);
  std::string line = line_about(jvm, run);
  EXPECT_NE(line.find("cannot load flamebpf's agent"), std::string::npos) << line;
  EXPECT_NE(line.find("perf-1.map in its root is held by uid " + std::to_string(kCoTenantUid)),
            std::string::npos)
      << line;
}

// The JVM creates its attach socket itself, binding it at .java_pid1.tmp and renaming it to
// .java_pid1: another user's file at either name (in the sticky /tmp) keeps it from doing so.
// flamebpf says who holds it, in one line, and ends on time.
TEST_F(HostileAttachTest, SocketNamesHeldByAnotherUserAreNamedInOneLine)
{
  auto socket_held = run_burner("ha-sock", as_app(), [&](const DockerDaemon::Container&) {
    as_user("ha-sock", kCoTenantUid, "echo squatter > /tmp/.java_pid1");
  });
  auto bind_held = run_burner("ha-sock-tmp", as_app(), [&](const DockerDaemon::Container&) {
    as_user("ha-sock-tmp", kCoTenantUid, "echo squatter > /tmp/.java_pid1.tmp");
  });

  auto run = profile({"ha-sock", "ha-sock-tmp"}, 3);
  print_figures("socket names held by another user", run);
  expect_prompt(run, 3, kAttachTimeoutSeconds);
  std::string uid = "uid " + std::to_string(kCoTenantUid);
  std::string socket_line = line_about(socket_held, run);
  EXPECT_NE(socket_line.find("cannot load flamebpf's agent"), std::string::npos) << socket_line;
  EXPECT_NE(socket_line.find("/tmp/.java_pid1: not a socket but a file of " + uid),
            std::string::npos)
      << socket_line;
  std::string bind_line = line_about(bind_held, run);
  EXPECT_NE(bind_line.find("cannot load flamebpf's agent"), std::string::npos) << bind_line;
  EXPECT_NE(bind_line.find(
                "/tmp/.java_pid1.tmp, where HotSpot first binds its socket, is held by " + uid),
            std::string::npos)
      << bind_line;
  for (const char* name : {"ha-sock", "ha-sock-tmp"})
    EXPECT_EQ(docker_.docker({"inspect", "-f", "{{.State.Running}}", name}), "true") << name;
}

} // namespace
} // namespace flamebpf::testing
