// CPython found in a process by the interpreter it maps (runtimes/cpython): a version whose layout
// was checked against a real interpreter is found without a word; any other is said once, however
// many of its processes run, and never read; a file that exports CPython's runtime state with
// nothing of CPython behind it costs one warning, and its process's native frames are named as
// any. The interpreters are Debian's python3.11 and the builds pyenv made on this machine.
#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

#include "harness.h"
#include "pprof_tool.h"
#include "process.h"
#include "pythons.h"
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

// flamebpf's stderr over pids for seconds at frequency, -v if verbose; the profiles go into dir.
std::string profile_pids(const std::vector<pid_t>& pids,
                         const fs::path& dir,
                         bool verbose = false,
                         int seconds = 1,
                         int frequency = 199)
{
  std::vector<std::string> argv{
      FLAMEBPF_BINARY,           "-d", std::to_string(seconds),         "-F",
      std::to_string(frequency), "-o", (dir / "python.folded").string()};
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

// One interpreter's profile, and flamebpf's stderr of the run that took it.
struct ProfiledPython {
  std::map<std::string, uint64_t> folded;
  std::string err;
  fs::path target; // its directory of dumps, folded and pprof
};

// Windows of 0.5 s (agent mode) left out at a recording's start: they hold the samples taken
// before the unwinding program that walks Python's frames is in (0.1 to 0.4 s here), as the first
// second of any profile does, which a service running for hours does not see.
constexpr size_t kStartWindows = 2;

// Each interpreter running script, profiled at 999 Hz for about seconds past kStartWindows, as
// many at once as there are CPUs (more would slow the start).
std::vector<ProfiledPython> profile_interpreters(const std::vector<std::string>& pythons,
                                                 const fs::path& script,
                                                 const fs::path& dir,
                                                 int seconds)
{
  auto cpus = static_cast<size_t>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
  std::vector<ProfiledPython> profiled;
  for (size_t start = 0; start < pythons.size(); start += cpus) {
    std::vector<std::unique_ptr<Child>> children;
    std::vector<std::string> argv{FLAMEBPF_BINARY,
                                  "-d",
                                  std::to_string(seconds + 1),
                                  "-F",
                                  "999",
                                  "--interval",
                                  "0.5",
                                  "--format",
                                  "folded,pprof"};
    std::vector<pid_t> pids;
    for (size_t i = start; i < std::min(pythons.size(), start + cpus); ++i) {
      children.push_back(
          std::make_unique<Child>(std::vector<std::string>{pythons[i], script.string()}));
      wait_until_busy(children.back()->pid(), interpreter_name(pythons[i]));
      pids.push_back(children.back()->pid());
      argv.push_back("--pid");
      argv.push_back(std::to_string(pids.back()));
    }
    fs::path out = dir / ("from-" + std::to_string(start));
    argv.push_back("--output-dir");
    argv.push_back(out.string());
    auto run = run_process(argv, {}, std::chrono::seconds(60));
    EXPECT_EQ(run.status, 0) << run.err;
    for (pid_t pid : pids) {
      // The target's directory: python3.11-<pid>.
      std::string suffix = "-" + std::to_string(pid);
      fs::path target;
      for (const auto& entry : fs::directory_iterator(out))
        if (entry.is_directory() && entry.path().filename().string().ends_with(suffix))
          target = entry.path();
      EXPECT_FALSE(target.empty()) << "no dumps of process " << pid << "\n" << run.err;
      profiled.push_back({read_dumps_after(target, kStartWindows), run.err, target});
    }
  }
  return profiled;
}

TEST(CPythonRuntime, AVersionWithoutAVerifiedLayoutIsSaidOnceAndNotRead)
{
  std::vector<std::pair<std::string, std::string>> unverified; // minor version, interpreter
  for (std::string minor : {"3.9", "3.10"})
    if (auto python = pyenv_python(minor + "."))
      unverified.emplace_back(minor, *python);
  if (unverified.empty())
    GTEST_SKIP() << "no CPython 3.9 or 3.10 built by pyenv here";
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
  std::vector<std::string> pythons = cpython_interpreters();
  if (pythons.empty())
    GTEST_SKIP() << "no verified CPython here";
  std::vector<std::unique_ptr<Child>> children;
  std::vector<pid_t> pids;
  for (const auto& python : pythons) {
    children.push_back(std::make_unique<Child>(std::vector<std::string>{python, "-c", kSpin}));
    wait_until_busy(children.back()->pid(), interpreter_name(python));
    pids.push_back(children.back()->pid());
  }
  TempDir dir;
  std::string err = profile_pids(pids, dir.path(), true);
  // Debian's python3.11 is stripped, and its frames' names wait for its debug files: the warning
  // that says so is not about CPython.
  EXPECT_EQ(lines_with(err, "CPython"), pids.size()) << err;
  EXPECT_EQ(lines_with(err, "layout not verified"), 0u) << err;
  for (pid_t pid : pids)
    EXPECT_EQ(lines_with(err, "process " + std::to_string(pid) + ": CPython 3.1"), 1u) << err;
}

// pyenv's 3.13 library, its _Py_DebugOffsets putting the thread's native id 8 bytes from where its
// headers (and the verified layout) put it, preloaded into two interpreters: the build is said
// once, saying where, and neither process is read by the layout; their native frames are named.
TEST(CPythonRuntime, ABuildWhoseOwnOffsetsDisagreeIsSaidOnceAndNotRead)
{
  auto python = pyenv_python("3.13.");
  if (!python)
    GTEST_SKIP() << "pyenv built no CPython 3.13 here";
  fs::path library = fs::path(*python).parent_path().parent_path() / "lib" / "libpython3.13.so.1.0";
  if (!fs::exists(library))
    GTEST_SKIP() << "pyenv's CPython 3.13 is linked whole, with no library to preload";
  std::string bytes;
  {
    std::ifstream in(library, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  // The cookie that starts _PyRuntime, followed by the version 3.13 (its text is in .rodata too).
  size_t start = std::string::npos;
  for (size_t at = bytes.find("xdebugpy"); at != std::string::npos && at + 16 <= bytes.size();
       at = bytes.find("xdebugpy", at + 1)) {
    uint64_t version = 0;
    std::memcpy(&version, bytes.data() + at + 8, sizeof version);
    if ((version >> 16) == 0x030d)
      start = at;
  }
  ASSERT_NE(start, std::string::npos) << library;
  constexpr size_t kNativeThreadId = 200; // thread_state.native_thread_id (debug_offsets.cpp)
  uint64_t offset = 0;
  std::memcpy(&offset, bytes.data() + start + kNativeThreadId, sizeof offset);
  offset += 8;
  std::memcpy(bytes.data() + start + kNativeThreadId, &offset, sizeof offset);
  TempDir dir;
  fs::path patched = dir.path() / library.filename();
  std::ofstream(patched, std::ios::binary) << bytes;
  std::vector<std::unique_ptr<Child>> children;
  std::vector<pid_t> pids;
  for (int i = 0; i < 2; ++i) {
    children.push_back(std::make_unique<Child>(
        std::vector<std::string>{"/usr/bin/env", "LD_PRELOAD=" + patched.string(), *python, "-c",
                                 "def spin():\n while True: pass\nspin()"}));
    wait_until_busy(children.back()->pid(), "python3.13");
    pids.push_back(children.back()->pid());
  }
  std::string err = profile_pids(pids, dir.path());
  EXPECT_EQ(lines_with(err, "thread_state.native_thread_id at " + std::to_string(offset)), 1u)
      << err;
  EXPECT_EQ(lines_with(err, "frames not named"), 1u) << err;
  uint64_t total = 0, in_loop = 0, in_python = 0;
  for (const auto& [stack, count] : read_all_folded(dir.path())) {
    total += count;
    in_loop += stack.find(";_PyEval_EvalFrameDefault") != std::string::npos ? count : 0;
    in_python += stack.find("spin (<string>:") != std::string::npos ? count : 0;
  }
  EXPECT_GT(total, 100u);
  EXPECT_GT(in_loop, total / 2) << err;
  EXPECT_EQ(in_python, 0u) << err;
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

// The share of the samples under function that had it at line, in a -top -lines table: from 0
// to 1 (a function that does not call itself is at one line in a sample).
double share_at_line(const std::map<std::string, Counts>& rows,
                     const std::string& function,
                     const std::string& script,
                     int line)
{
  uint64_t all = 0, at_line = 0;
  for (const auto& [name, counts] : rows) {
    if (!name.starts_with(function + " " + script + ":"))
      continue;
    all += counts.cum;
    at_line += name == function + " " + script + ":" + std::to_string(line) ? counts.cum : 0;
  }
  EXPECT_GT(all, 0u) << function;
  return all == 0 ? 0.0 : static_cast<double>(at_line) / static_cast<double>(all);
}

// pprof has each Python frame at the line it was at, read from the source: heavy and light at
// their call of work, and work in its loop (the frames only just entered are at their first line).
void expect_lines_of_split(PprofTool pprof, const fs::path& target, const std::string& script)
{
  std::vector<fs::path> dumps;
  for (const auto& entry : fs::directory_iterator(target))
    if (entry.path().string().ends_with(".pb.gz"))
      dumps.push_back(entry.path());
  std::sort(dumps.begin(), dumps.end());
  ASSERT_GT(dumps.size(), kStartWindows) << target;
  const std::string& dump = dumps.back(); // a window past the start
  auto rows = pprof.top(
      {"-top", "-lines", "-nodecount=500", "-nodefraction=0", "-sample_index=samples"}, dump);
  EXPECT_GE(share_at_line(rows, "heavy", script, 9), 0.95);
  EXPECT_GE(share_at_line(rows, "light", script, 13), 0.95);
  double in_loop = share_at_line(rows, "work", script, 3) + share_at_line(rows, "work", script, 4);
  EXPECT_GE(in_loop, 0.95);
  // By function, as pprof shows by default, each function is one row, whatever its lines.
  auto functions =
      pprof.top({"-top", "-nodecount=500", "-nodefraction=0", "-sample_index=samples"}, dump);
  for (const char* function : {"heavy", "light", "work", "outer", "<module>"})
    EXPECT_TRUE(functions.contains(function)) << function;
}

TEST(CPythonRuntime, PythonFunctionsAreNamedAndTheirSplitShows)
{
  std::vector<std::string> pythons = cpython_interpreters();
  if (pythons.empty())
    GTEST_SKIP() << "no verified CPython here";
  std::string go = find_go();
  TempDir dir;
  fs::path script = dir.path() / "split.py";
  std::ofstream(script) << kPythonSplitScript;
  auto profiled = profile_interpreters(pythons, script, dir.path(), 4);
  for (size_t i = 0; i < pythons.size(); ++i) {
    SCOPED_TRACE(pythons[i]);
    const std::string& err = profiled[i].err;
    PythonSplitShares shares = python_split_shares(profiled[i].folded, script.string());
    ASSERT_GT(shares.total, 999u * 4 * 7 / 10) << err;
    EXPECT_GE(shares.python, shares.total * 95 / 100) << err;
    EXPECT_GE(shares.module, shares.total * 95 / 100) << err;
    ASSERT_GT(shares.light, 0u);
    double ratio = static_cast<double>(shares.heavy) / static_cast<double>(shares.light);
    EXPECT_NEAR(ratio, 3.0, 0.3) << shares.heavy << " in heavy, " << shares.light << " in light";
    if (!go.empty())
      expect_lines_of_split(PprofTool(go, dir.path()), profiled[i].target, script.string());
  }
}

// Two threads: the main one spins in Python, holding the GIL most of the time; the other hashes a
// MiB in OpenSSL (hashlib releases the GIL while it does) and waits for the GIL to return.
constexpr const char* kThreadsScript = R"(import hashlib
import threading

data = bytes(1 << 20)


def digest():
    return hashlib.sha256(data).digest()


def hashing():
    while True:
        digest()


def spin():
    s = 0
    while True:
        s += 1


threading.Thread(target=hashing, daemon=True).start()
spin()
)";

TEST(CPythonRuntime, EachThreadHasItsOwnFramesAndACExtensionRunsUnderItsCaller)
{
  std::vector<std::string> pythons = cpython_interpreters();
  if (pythons.empty())
    GTEST_SKIP() << "no verified CPython here";
  TempDir dir;
  fs::path script = dir.path() / "threads.py";
  std::ofstream(script) << kThreadsScript;
  auto profiled = profile_interpreters(pythons, script, dir.path(), 3);
  for (size_t i = 0; i < pythons.size(); ++i) {
    const std::string& python = pythons[i];
    SCOPED_TRACE(python);
    const std::string& err = profiled[i].err;
    std::string in_script = " (" + script.string() + ":";
    std::string spin = ";spin" + in_script, digest = ";digest" + in_script;
    uint64_t total = 0, spinning = 0, hashing = 0, in_openssl = 0, openssl_under_digest = 0;
    uint64_t waiting = 0, waiting_as_hasher = 0;
    for (const auto& [stack, count] : profiled[i].folded) {
      total += count;
      bool spins = stack.find(spin) != std::string::npos;
      bool hashes = stack.find(digest) != std::string::npos;
      // One thread's stack never holds the other's frames.
      EXPECT_FALSE(spins && hashes) << stack;
      spinning += spins ? count : 0;
      hashing += hashes ? count : 0;
      // OpenSSL's frames, without the GIL: under the Python function that called hashlib, found
      // by the walk of the interpreter's threads.
      if (stack.find(";SHA256_Update") != std::string::npos) {
        in_openssl += count;
        // Next to digest, the extension module's frames (named, or its file's where stripped),
        // and no Python frame after them.
        std::string caller = ";digest" + in_script + "7);";
        size_t at = stack.find(caller);
        bool under_digest = at != std::string::npos &&
                            stack.compare(at + caller.size(), 8, "_hashlib") == 0 &&
                            stack.find(in_script, at + caller.size()) == std::string::npos &&
                            stack.find(";<module>") == std::string::npos;
        openssl_under_digest += under_digest ? count : 0;
      }
      // The hashing thread, back from OpenSSL, waits for the GIL the other holds: under its
      // native frames, its own Python frames, not the holder's.
      if (stack.find(";_hashlib") != std::string::npos &&
          stack.find(";take_gil") != std::string::npos) {
        waiting += count;
        waiting_as_hasher += hashes && !spins ? count : 0;
      }
    }
    ASSERT_GT(total, 999u * 3 * 6 / 10) << err;
    EXPECT_GE(spinning, total * 30 / 100) << err;
    EXPECT_GE(hashing, total * 5 / 100) << err;
    EXPECT_GE(spinning + hashing, total * 95 / 100) << err;
    EXPECT_GE(in_openssl, total * 5 / 100) << err;
    EXPECT_GE(openssl_under_digest, in_openssl * 95 / 100) << err;
    EXPECT_EQ(waiting_as_hasher, waiting) << err;
    // pyenv's builds keep their symbols, which name the wait, so that the check above is not
    // empty (4 to 20 samples in 2 s here: the wait is short); Debian's is stripped.
    if (python.find("/.pyenv/") != std::string::npos) {
      EXPECT_GE(waiting, 1u) << err;
    }
  }
}

} // namespace
} // namespace flamebpf::testing
