// CPython found in a process by the interpreter it maps (runtimes/cpython): a version whose layout
// was checked against a real interpreter is found without a word; any other is said once, however
// many of its processes run, and never read; a file that exports CPython's runtime state with
// nothing of CPython behind it costs one warning, and its process's native frames are named as
// any. The interpreters are Debian's python3.11 and the builds pyenv made on this machine.
#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <gtest/gtest.h>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness.h"
#include "process.h"
#include "temp_dir.h"

namespace flamebpf::testing {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSpin = "while True: pass";

// The lines of text that contain needle.
size_t lines_with(const std::string& text, const std::string& needle)
{
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++count;
  return count;
}

// The interpreter pyenv built of version prefix ("3.13."), if there is one.
std::optional<std::string> pyenv_python(const std::string& prefix)
{
  const char* home = std::getenv("HOME");
  fs::path versions = fs::path(home ? home : "/root") / ".pyenv" / "versions";
  std::error_code failed;
  for (const auto& entry : fs::directory_iterator(versions, failed)) {
    std::string version = entry.path().filename();
    if (!version.starts_with(prefix))
      continue;
    std::string minor = version.substr(0, version.find('.', prefix.size() - 1));
    fs::path python = entry.path() / "bin" / ("python" + minor);
    if (fs::exists(python))
      return python.string();
  }
  return std::nullopt;
}

// The stacks of every folded file in dir: flamebpf writes one per target, here one per process.
std::map<std::string, uint64_t> read_all_folded(const fs::path& dir)
{
  std::map<std::string, uint64_t> stacks;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().extension() == ".folded")
      for (const auto& [stack, count] : read_folded(entry.path()))
        stacks[stack] += count;
  return stacks;
}

// flamebpf's stderr over pids for a second, -v if verbose; the profiles go into dir.
std::string profile_pids(const std::vector<pid_t>& pids, const fs::path& dir, bool verbose = false)
{
  std::vector<std::string> argv{
      FLAMEBPF_BINARY, "-d", "1", "-F", "199", "-o", (dir / "python.folded").string()};
  if (verbose)
    argv.push_back("-v");
  for (pid_t pid : pids) {
    argv.push_back("--pid");
    argv.push_back(std::to_string(pid));
  }
  auto run = run_process(argv, {}, std::chrono::seconds(60));
  EXPECT_EQ(run.status, 0) << run.err;
  return run.err;
}

TEST(CPythonRuntime, AVersionWithoutAVerifiedLayoutIsSaidOnceAndNotRead)
{
  std::vector<std::pair<std::string, std::string>> unverified; // minor version, interpreter
  for (std::string minor : {"3.10", "3.12", "3.13"})
    if (auto python = pyenv_python(minor + "."))
      unverified.emplace_back(minor, *python);
  if (unverified.empty())
    GTEST_SKIP() << "no CPython 3.10, 3.12 or 3.13 built by pyenv here";
  TempDir dir;
  // Two processes of each: the warning is the version's, not the process's.
  std::vector<std::unique_ptr<Child>> children;
  std::vector<pid_t> pids;
  for (const auto& [minor, python] : unverified) {
    for (int i = 0; i < 2; ++i) {
      children.push_back(std::make_unique<Child>(std::vector<std::string>{python, "-c", kSpin}));
      wait_until_busy(children.back()->pid(), "python" + minor);
      pids.push_back(children.back()->pid());
    }
  }
  std::string err = profile_pids(pids, dir.path());
  for (const auto& [minor, python] : unverified) {
    EXPECT_EQ(lines_with(err, "CPython " + minor), 1u) << err;
    EXPECT_EQ(lines_with(err, "CPython " + minor + ".x: frames"), 0u);
  }
  EXPECT_EQ(lines_with(err, "frames not named, layout not verified"), unverified.size()) << err;
  // Read as native code only: the evaluation loop is named, and there is no Python frame.
  uint64_t total = 0, in_loop = 0;
  for (const auto& [stack, count] : read_all_folded(dir.path())) {
    total += count;
    in_loop += stack.find("_PyEval_EvalFrameDefault") != std::string::npos ? count : 0;
  }
  EXPECT_GT(total, 0u);
  EXPECT_GT(in_loop, total / 2) << err;
}

TEST(CPythonRuntime, AVerifiedVersionIsFoundWithoutAWarning)
{
  std::vector<std::string> pythons;
  if (fs::exists("/usr/bin/python3.11"))
    pythons.push_back("/usr/bin/python3.11");
  if (auto python = pyenv_python("3.11."))
    pythons.push_back(*python);
  if (pythons.empty())
    GTEST_SKIP() << "no CPython 3.11 here";
  std::vector<std::unique_ptr<Child>> children;
  std::vector<pid_t> pids;
  for (const auto& python : pythons) {
    children.push_back(std::make_unique<Child>(std::vector<std::string>{python, "-c", kSpin}));
    wait_until_busy(children.back()->pid(), "python3.11");
    pids.push_back(children.back()->pid());
  }
  TempDir dir;
  std::string err = profile_pids(pids, dir.path(), true);
  // Debian's python3.11 is stripped, and its frames' names wait for its debug files: the warning
  // that says so is not about CPython.
  EXPECT_EQ(lines_with(err, "CPython"), pids.size()) << err;
  EXPECT_EQ(lines_with(err, "layout not verified"), 0u) << err;
  for (pid_t pid : pids)
    EXPECT_EQ(lines_with(err, "process " + std::to_string(pid) + ": CPython 3.11."), 1u) << err;
}

TEST(CPythonRuntime, AForgedInterpreterCostsOneWarningAndItsNativeFramesAreNamed)
{
  // The forged library under the name of the interpreter's, preloaded into two busy processes.
  TempDir dir;
  fs::path forged = dir.path() / "libpython3.11.so.1.0";
  fs::copy_file(FLAMEBPF_FORGED_PYTHON, forged);
  std::vector<std::unique_ptr<Child>> children;
  std::vector<pid_t> pids;
  for (int i = 0; i < 2; ++i) {
    children.push_back(std::make_unique<Child>(std::vector<std::string>{
        "/usr/bin/env", "LD_PRELOAD=" + forged.string(), BURNER_BINARY, "30"}));
    wait_until_busy(children.back()->pid(), "burner");
    pids.push_back(children.back()->pid());
  }
  std::string err = profile_pids(pids, dir.path());
  // One line for the file, which both processes map.
  EXPECT_EQ(lines_with(err, "libpython3.11.so.1.0"), 1u) << err;
  EXPECT_EQ(lines_with(err, "Py_Version"), 1u) << err;
  EXPECT_EQ(lines_with(err, "layout not verified"), 0u) << err;
  uint64_t total = 0, named = 0;
  for (const auto& [stack, count] : read_all_folded(dir.path())) {
    total += count;
    named += stack.find(";run;a;b;c") != std::string::npos ? count : 0;
  }
  EXPECT_GT(total, 100u);
  EXPECT_GT(named, total * 9 / 10) << err;
}

} // namespace
} // namespace flamebpf::testing
