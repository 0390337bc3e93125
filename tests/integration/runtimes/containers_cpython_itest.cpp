// CPython in hardened containers (a read-only root, no capabilities, a non-root user, a /tmp that
// runs nothing): Debian's interpreter linked whole and pyenv's libpython3.11.so, each profiled by
// its container's name, its Python functions named from outside with nothing written into the
// container, the split of two functions as their work is; and with --all-containers, pprof
// carries each function's file and line and each sample its container.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "container_harness.h"
#include "harness.h"
#include "pprof_tool.h"
#include "pythons.h"
#include "temp_dir.h"

namespace flamebpf::testing {
namespace {

namespace fs = std::filesystem;

// The options that run interpreter with the host's files it needs, bind-mounted read-only into
// the burner image, which has the C library and the loader only.
std::vector<std::string> python_container_options(const std::string& interpreter,
                                                  const fs::path& script)
{
  std::vector<std::string> options{"--read-only",
                                   "--tmpfs",
                                   "/tmp:rw,noexec,nosuid,mode=1777",
                                   "--cap-drop",
                                   "ALL",
                                   "--security-opt",
                                   "no-new-privileges",
                                   "--user",
                                   "1000:1000",
                                   "-v",
                                   script.string() + ":/app/split.py:ro"};
  auto mount = [&](const std::string& path) {
    options.push_back("-v");
    options.push_back(path + ":" + path + ":ro");
  };
  // A library by its name, from the file its host link names.
  auto mount_library = [&](const std::string& library) {
    fs::path path = fs::path("/lib/x86_64-linux-gnu") / library;
    options.push_back("-v");
    options.push_back(fs::canonical(path).string() + ":" + path.string() + ":ro");
  };
  if (interpreter.starts_with("/usr/bin/")) {
    mount(interpreter);
    mount("/usr/lib/python3.11");
    for (const char* library : {"libm.so.6", "libz.so.1", "libexpat.so.1"})
      mount_library(library);
  } else {
    // pyenv's build: its whole prefix, where its libpython and standard library are.
    mount(fs::path(interpreter).parent_path().parent_path().string());
    mount_library("libm.so.6");
  }
  return options;
}

// The lines of text, in no order (docker diff lists a change in any).
std::set<std::string> sorted_lines(const std::string& text)
{
  std::set<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    lines.insert(line);
  return lines;
}

TEST(CPythonContainerTest, HardenedContainersAreNamedByNameAndInPprof)
{
  ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
  // Debian's interpreter linked whole, and pyenv's newest libpython: one per CPU, so that each
  // loses no more of its samples to the start than on the host (cpython_itest.cpp runs them all).
  std::vector<std::string> all = cpython_interpreters();
  std::vector<std::string> pythons;
  if (!all.empty())
    pythons.push_back(all.front());
  if (all.size() > 1)
    pythons.push_back(all.back());
  if (pythons.empty())
    GTEST_SKIP() << "no verified CPython here";
  std::string go = find_go();
  ASSERT_FALSE(go.empty()) << "go tool pprof is needed: install golang-go";
  DockerDaemon& docker = DockerDaemon::shared();
  ContainersRemovedAtEnd removed(docker);
  TempDir dir;
  fs::path script = dir.path() / "split.py";
  std::ofstream(script) << kPythonSplitScript;
  fs::permissions(dir.path(), fs::perms::others_exec, fs::perm_options::add);
  std::vector<std::string> names;
  std::vector<pid_t> pids;
  std::vector<std::string> comms;
  std::vector<std::set<std::string>> changes; // docker diff before flamebpf: the mount points
  for (const auto& python : pythons) {
    // py-debian-3.11, py-pyenv-3.12: interpreter_name is "python3.12".
    std::string name = std::string(python.starts_with("/usr/bin/") ? "py-debian-" : "py-pyenv-") +
                       interpreter_name(python).substr(6);
    auto container = docker.run(name, python_container_options(python, script),
                                docker.burner_image(), {python, "-I", "/app/split.py"});
    wait_until_busy(container.pid, interpreter_name(python));
    names.push_back(name);
    comms.push_back(interpreter_name(python));
    pids.push_back(container.pid);
    changes.push_back(sorted_lines(docker.docker({"diff", name})));
  }

  // By name: one folded file per container, each with its own functions and split; the
  // containers share the CPUs.
  uint64_t cpus = std::min<uint64_t>(names.size(), std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
  // Past the first two windows of 0.5 s, which hold the start (cpython_itest.cpp).
  std::vector<std::string> args{
      "-d",  "5",        "-F",     "999",          "--interval",
      "0.5", "--format", "folded", "--output-dir", (dir.path() / "by-name").string()};
  for (const auto& name : names) {
    args.push_back("--cgroup");
    args.push_back(name);
  }
  auto run = run_flamebpf(args);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("CPython"), std::string::npos) << run.output;
  for (const auto& name : names) {
    SCOPED_TRACE(name);
    auto folded = read_dumps_after(dir.path() / "by-name" / name, 2);
    PythonSplitShares shares = python_split_shares(folded, "/app/split.py");
    ASSERT_GT(shares.total, 999u * 4 * 7 / 10 * cpus / names.size()) << run.output;
    EXPECT_GE(shares.python, shares.total * 95 / 100) << run.output;
    EXPECT_GE(shares.module, shares.total * 95 / 100) << run.output;
    ASSERT_GT(shares.light, 0u);
    double ratio = static_cast<double>(shares.heavy) / static_cast<double>(shares.light);
    EXPECT_NEAR(ratio, 3.0, 0.4) << shares.heavy << " in heavy, " << shares.light << " in light";
  }

  // Every container, in pprof: the functions with their file and line, the samples labelled.
  run = run_flamebpf({"--all-containers", "--containers-only", "-d", "2", "-F", "499", "-o",
                      (dir.path() / "all.pb.gz").string()});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  PprofTool pprof(go, dir.path());
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& name = names[i];
    SCOPED_TRACE(name);
    std::string file = dir.path() / ("all." + name + ".pb.gz");
    auto rows =
        pprof.top({"-top", "-nodecount=200", "-nodefraction=0", "-sample_index=samples"}, file);
    ASSERT_TRUE(rows.contains(comms[i])) << run.output;
    uint64_t total = rows.at(comms[i]).cum;
    for (const char* function : {"<module>", "outer", "heavy", "light", "work"}) {
      ASSERT_TRUE(rows.contains(function)) << function;
      EXPECT_GT(rows.at(function).cum, 0u) << function;
    }
    // Of 2 s, the first 0.1-0.3 s go by before the unwinding program that walks Python's frames
    // is in (the by-name run above holds the share to 95 %).
    EXPECT_GE(rows.at("<module>").cum, total * 8 / 10);
    std::string lines = pprof.run({"-top", "-lines", "-nodecount=200", "-nodefraction=0"}, file);
    // Each at the line it was at: heavy's and light's calls of work (they start at 8 and 12).
    EXPECT_NE(lines.find("heavy /app/split.py:9"), std::string::npos) << lines;
    EXPECT_NE(lines.find("light /app/split.py:13"), std::string::npos) << lines;
    std::string tags = pprof.run({"-tags"}, file);
    EXPECT_NE(tags.find(name), std::string::npos) << tags;
  }
  // Nothing was written into the containers: their root changed no further, their /tmp is empty.
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(sorted_lines(docker.docker({"diff", names[i]})), changes[i]) << names[i];
    fs::path tmp = "/proc/" + std::to_string(pids[i]) + "/root/tmp";
    EXPECT_TRUE(fs::is_empty(tmp)) << names[i];
  }
}

} // namespace
} // namespace flamebpf::testing
