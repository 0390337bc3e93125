// The CPython interpreters of this machine (Debian's python3.11 and the builds pyenv made) and the
// Python split workload, for the unit and integration tests of the CPython runtime.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace flamebpf::testing {

// The interpreter pyenv built of version prefix ("3.13."), if there is one.
inline std::optional<std::string> pyenv_python(const std::string& prefix)
{
  namespace fs = std::filesystem;
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

// Every CPython here whose layout flamebpf verified: Debian's 3.11 (linked whole, stripped) and
// pyenv's 3.11, 3.12 and 3.13 (libpython3.x.so, with symbols).
inline std::vector<std::string> cpython_interpreters()
{
  std::vector<std::string> pythons;
  if (std::filesystem::exists("/usr/bin/python3.11"))
    pythons.push_back("/usr/bin/python3.11");
  for (const char* version : {"3.11.", "3.12.", "3.13."})
    if (auto python = pyenv_python(version))
      pythons.push_back(*python);
  return pythons;
}

// The process name an interpreter runs under: its file's name, python3.11.
inline std::string interpreter_name(const std::string& python)
{
  return std::filesystem::path(python).filename().string();
}

// heavy does three times light's work per round, both through work, under outer; heavy starts at
// line 8 and light at line 12.
inline constexpr const char* kPythonSplitScript = R"(def work(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def heavy():
    return work(300000)


def light():
    return work(100000)


def outer():
    while True:
        heavy()
        light()


outer()
)";

// Samples of folded stacks of the split workload run from script.
struct PythonSplitShares {
  uint64_t total = 0;
  uint64_t python = 0; // with a frame of the script
  uint64_t module = 0; // reaching the script's <module>
  uint64_t heavy = 0;
  uint64_t light = 0;
};

inline PythonSplitShares python_split_shares(const std::map<std::string, uint64_t>& folded,
                                             const std::string& script)
{
  PythonSplitShares shares;
  std::string in_script = " (" + script + ":";
  for (const auto& [stack, count] : folded) {
    auto has = [&](const std::string& frame) { return stack.find(frame) != std::string::npos; };
    shares.total += count;
    shares.python += has(in_script) ? count : 0;
    shares.module += has(";<module>" + in_script) ? count : 0;
    shares.heavy += has(";heavy" + in_script + "8)") ? count : 0;
    shares.light += has(";light" + in_script + "12)") ? count : 0;
  }
  return shares;
}

} // namespace flamebpf::testing
