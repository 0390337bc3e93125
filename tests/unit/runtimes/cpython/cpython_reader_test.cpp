// Real CPython 3.11 interpreters read from outside by the verified layout: Debian's python3.11
// (the interpreter linked whole) and pyenv's build with --enable-shared (its state in
// libpython3.11.so). A program whose main thread waits in inner_wait, called by outer, and whose
// second thread loops in a method: each thread is found by its id, with its frames named, and the
// thread that holds the GIL is the one running Python.
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
#include "runtimes/cpython/cpython_file.h"
#include "runtimes/cpython/cpython_reader.h"
#include "temp_dir.h"
#include "test_support.h"

namespace flamebpf::cpython {
namespace {

namespace fs = std::filesystem;

constexpr const char* kScript = R"(import threading
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

// The pyenv build of CPython 3.11's interpreter; "" if there is none.
std::string pyenv_python311()
{
  const char* home = ::getenv("HOME");
  fs::path versions = fs::path(home ? home : "/root") / ".pyenv" / "versions";
  std::error_code failed;
  for (const auto& entry : fs::directory_iterator(versions, failed)) {
    fs::path python = entry.path() / "bin" / "python3.11";
    if (entry.path().filename().string().starts_with("3.11.") && fs::exists(python))
      return python.string();
  }
  return "";
}

class CPythonReaderTest : public ::testing::TestWithParam<std::string> {
protected:
  void TearDown() override
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
    testing::write_file(script, kScript);
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

  testing::TempDir dir_;
  pid_t child_ = -1;
  std::string script_;
};

TEST_P(CPythonReaderTest, EachThreadIsFoundWithItsFramesNamed)
{
  std::string python = GetParam() == "debian" ? "/usr/bin/python3.11" : pyenv_python311();
  if (python.empty())
    GTEST_SKIP() << "pyenv built no CPython 3.11 here";
  ASSERT_NO_FATAL_FAILURE(start(python));
  CPythonAddresses found = addresses();
  ASSERT_NE(found.runtime, 0u);
  auto layout = verified_layout(3, 11);
  ASSERT_TRUE(layout);
  CPythonReader reader(static_cast<uint32_t>(child_), found, *layout);

  auto names = [&](const PythonThread& thread) {
    std::vector<std::string> named;
    for (const auto& frame : thread.frames) {
      auto read = reader.code(frame.code);
      named.push_back(read ? read->name : "?");
    }
    return named;
  };
  // The worker may be between two reads of its frames: a few tries find it whole.
  std::vector<PythonThread> threads;
  for (int attempt = 0; attempt < 20; ++attempt) {
    auto read = reader.threads();
    ASSERT_TRUE(read) << read.error().message;
    threads = *read;
    if (threads.size() == 2 && !threads[0].frames_cut && !threads[1].frames_cut)
      break;
  }
  ASSERT_EQ(threads.size(), 2u);
  const PythonThread* main_thread = nullptr;
  const PythonThread* worker = nullptr;
  for (const auto& thread : threads)
    (thread.native_id == static_cast<uint32_t>(child_) ? main_thread : worker) = &thread;
  ASSERT_NE(main_thread, nullptr);
  ASSERT_NE(worker, nullptr);
  EXPECT_TRUE(
      fs::exists("/proc/" + std::to_string(child_) + "/task/" + std::to_string(worker->native_id)));

  EXPECT_EQ(names(*main_thread), (std::vector<std::string>{"inner_wait", "outer", "<module>"}));
  auto code = reader.code(main_thread->frames.at(0).code);
  ASSERT_TRUE(code);
  EXPECT_EQ(code->filename, script_);
  EXPECT_EQ(code->first_line, 12u);
  EXPECT_FALSE(code->cut);
  // Each frame at the line of its call: time.sleep, inner_wait(), outer().
  std::vector<std::optional<uint32_t>> lines;
  for (const auto& frame : main_thread->frames)
    lines.push_back(reader.line(frame));
  EXPECT_EQ(lines, (std::vector<std::optional<uint32_t>>{14u, 18u, 24u}));
  // The worker's own method first, under threading's.
  auto worker_names = names(*worker);
  ASSERT_GE(worker_names.size(), 2u);
  EXPECT_EQ(worker_names.at(0), "Worker.spin");
  EXPECT_EQ(worker_names.at(1), "Thread.run");
  // The main thread sleeps, the GIL released: the worker is the one that can hold it.
  EXPECT_FALSE(main_thread->holds_gil);
}

INSTANTIATE_TEST_SUITE_P(Interpreters, CPythonReaderTest, ::testing::Values("debian", "pyenv"));

// What a process that is no CPython of this layout has where the runtime state would be is
// read as garbage: a bounded read, no threads or a failure, never a crash.
TEST(CPythonReader, MemoryThatIsNoCPythonGivesNothingWrong)
{
  std::vector<uint64_t> garbage(4096, 0);
  for (size_t i = 0; i < garbage.size(); ++i)
    garbage[i] = reinterpret_cast<uint64_t>(&garbage[(i * 7 + 3) % garbage.size()]);
  auto layout = verified_layout(3, 11);
  ASSERT_TRUE(layout);
  // The types are elsewhere: no pointer in the garbage is one of them.
  static uint64_t types[3];
  auto type = [](int i) { return reinterpret_cast<uint64_t>(&types[i]); };
  CPythonReader reader(static_cast<uint32_t>(::getpid()),
                       {reinterpret_cast<uint64_t>(garbage.data()), type(0), type(1), type(2)},
                       *layout);
  auto threads = reader.threads();
  if (threads) {
    EXPECT_LE(threads->size(), CPythonReader::kMaxThreads);
    for (const auto& thread : *threads) {
      EXPECT_LE(thread.frames.size(), CPythonReader::kMaxFrames);
      for (const auto& frame : thread.frames) {
        EXPECT_FALSE(reader.code(frame.code).has_value());
        EXPECT_FALSE(reader.line(frame).has_value());
      }
    }
  }
}

} // namespace
} // namespace flamebpf::cpython
