// A real CPython 3.11 running a script that waits, for the tests that read it from outside:
// Debian's python3.11 (the interpreter linked whole) or pyenv's build with --enable-shared (its
// state in libpython3.11.so).
#pragma once

#include <chrono>
#include <filesystem>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "common/exported_objects.h"
#include "common/procfs.h"
#include "common/unique_fd.h"
#include "process.h"
#include "pythons.h"
#include "runtimes/cpython/cpython_file.h"
#include "temp_dir.h"
#include "test_support.h"

namespace flamebpf::cpython {

namespace fs = std::filesystem;

// Its main thread waits in inner_wait, called by outer; its second thread loops in a method.
inline constexpr const char* kWaiterScript = R"(import threading
import time


class Worker:
    def spin(self, started):
        started.set()
        while True:
            sum(range(1000))


def inner_wait():
    print("ready", flush=True)
    time.sleep(600)


def outer():
    inner_wait()


started = threading.Event()
threading.Thread(target=Worker().spin, args=(started,), daemon=True).start()
started.wait()
outer()
)";

// A CPython running kWaiterScript, killed with this.
class WaitingPython {
public:
  WaitingPython() = default;
  WaitingPython(const WaitingPython&) = delete;
  WaitingPython& operator=(const WaitingPython&) = delete;
  ~WaitingPython()
  {
    if (child_ > 0) {
      ::kill(child_, SIGKILL);
      ::waitpid(child_, nullptr, 0);
    }
  }

  // Starts python on the script and waits for it to say it is ready.
  void start(const std::string& python)
  {
    fs::path script = dir_.path() / "waiter.py";
    testing::write_file(script, kWaiterScript);
    auto pipe = testing::make_pipe();
    testing::SpawnOptions options;
    options.output = pipe.write_end.get();
    child_ = testing::spawn({python, script.string()}, options);
    pipe.write_end = UniqueFd();
    // Its line may come in more than one read.
    std::string said;
    while (said.find('\n') == std::string::npos && said.size() < 64) {
      pollfd ready{pipe.read_end.get(), POLLIN, 0};
      ASSERT_EQ(::poll(&ready, 1, 30000), 1) << python << " did not start";
      char chunk[16];
      ssize_t n = ::read(pipe.read_end.get(), chunk, sizeof chunk);
      ASSERT_GT(n, 0) << python << " ended";
      said.append(chunk, static_cast<size_t>(n));
    }
    ASSERT_EQ(said, "ready\n");
    script_ = script.string();
    // Its main thread goes on from the print to the sleep: the frames are read once it sleeps.
    // x86-64's clock_nanosleep (time.sleep's), nanosleep, select and pselect6.
    std::string syscall_file = "/proc/" + std::to_string(child_) + "/syscall";
    auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
      auto text = procfs::read_file(syscall_file, 4096);
      std::string number = text ? text->substr(0, text->find(' ')) : "";
      if (number == "230" || number == "35" || number == "23" || number == "270")
        break;
      ASSERT_LT(std::chrono::steady_clock::now(), give_up) << python << " never slept";
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

  // Where the child has its runtime state and types: in the mapped file that exports them.
  CPythonAddresses addresses()
  {
    auto maps = procfs::read_file("/proc/" + std::to_string(child_) + "/maps", 16 << 20);
    EXPECT_TRUE(maps);
    for (const auto& mapping : procfs::parse_proc_maps(maps ? *maps : "")) {
      if (!mapping.executable || !mapping.file_backed())
        continue;
      auto elf = testing::open_elf(mapping.path);
      if (!elf)
        continue;
      auto found = find_cpython(elf->reader, mapping.path);
      auto bias = load_bias(elf->reader, mapping);
      if (found && *found && bias)
        return (*found)->in_file.moved_by(*bias);
    }
    ADD_FAILURE() << "no mapping of process " << child_ << " exports _PyRuntime";
    return {};
  }

  pid_t pid() const { return child_; }
  const std::string& script() const { return script_; }

  // The interpreters a test runs on: Debian's 3.11 and pyenv's build of each verified version.
  static std::vector<std::string> interpreters()
  {
    return {"debian-3.11", "pyenv-3.11", "pyenv-3.12", "pyenv-3.13"};
  }

  // The interpreter one of interpreters() names; "" if there is none.
  static std::string python(const std::string& which)
  {
    if (which == "debian-3.11")
      return "/usr/bin/python3.11";
    return flamebpf::testing::pyenv_python(which.substr(which.find('-') + 1) + ".").value_or("");
  }

  // The minor version of one of interpreters(): 11 of "pyenv-3.11".
  static uint32_t minor_version(const std::string& which)
  {
    return static_cast<uint32_t>(std::stoul(which.substr(which.rfind('.') + 1)));
  }

private:
  testing::TempDir dir_;
  pid_t child_ = -1;
  std::string script_;
};

} // namespace flamebpf::cpython
