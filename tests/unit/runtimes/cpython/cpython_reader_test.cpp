// Real CPython 3.11 interpreters read from outside by the verified layout: Debian's python3.11
// (the interpreter linked whole) and pyenv's build with --enable-shared (its state in
// libpython3.11.so). A program whose main thread waits in inner_wait, called by outer, and whose
// second thread loops in a method: each thread is found by its id, with its frames named, and the
// thread that holds the GIL is the one running Python.
#include <filesystem>
#include <gtest/gtest.h>
#include <string>
#include <vector>

#include "runtimes/cpython/cpython_reader.h"
#include "waiting_python.h"

namespace flamebpf::cpython {
namespace {

class CPythonReaderTest : public ::testing::TestWithParam<std::string> {
protected:
  WaitingPython waiter_;
};

TEST_P(CPythonReaderTest, EachThreadIsFoundWithItsFramesNamed)
{
  std::string python = WaitingPython::python(GetParam());
  if (python.empty())
    GTEST_SKIP() << "no " << GetParam() << " here";
  ASSERT_NO_FATAL_FAILURE(waiter_.start(python));
  CPythonAddresses found = waiter_.addresses();
  ASSERT_NE(found.runtime, 0u);
  auto layout = verified_layout(3, WaitingPython::minor_version(GetParam()));
  ASSERT_TRUE(layout);
  CPythonReader reader(static_cast<uint32_t>(waiter_.pid()), found, *layout);

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
    (thread.native_id == static_cast<uint32_t>(waiter_.pid()) ? main_thread : worker) = &thread;
  ASSERT_NE(main_thread, nullptr);
  ASSERT_NE(worker, nullptr);
  EXPECT_TRUE(fs::exists("/proc/" + std::to_string(waiter_.pid()) + "/task/" +
                         std::to_string(worker->native_id)));

  EXPECT_EQ(names(*main_thread), (std::vector<std::string>{"inner_wait", "outer", "<module>"}));
  auto code = reader.code(main_thread->frames.at(0).code);
  ASSERT_TRUE(code);
  EXPECT_EQ(code->filename, waiter_.script());
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

INSTANTIATE_TEST_SUITE_P(Interpreters,
                         CPythonReaderTest,
                         ::testing::ValuesIn(WaitingPython::interpreters()));

// What a process that is no CPython of this layout has where the runtime state would be is
// read as garbage: a bounded read, no threads or a failure, never a crash.
TEST(CPythonReader, MemoryThatIsNoCPythonGivesNothingWrong)
{
  std::vector<uint64_t> garbage(4096, 0);
  for (size_t i = 0; i < garbage.size(); ++i)
    garbage[i] = reinterpret_cast<uint64_t>(&garbage[(i * 7 + 3) % garbage.size()]);
  // The types are elsewhere: no pointer in the garbage is one of them.
  static uint64_t types[3];
  auto type = [](int i) { return reinterpret_cast<uint64_t>(&types[i]); };
  size_t layouts = 0;
  for (uint32_t minor = 0; minor < 20; ++minor) {
    auto layout = verified_layout(3, minor);
    if (!layout)
      continue;
    ++layouts;
    CPythonReader reader(static_cast<uint32_t>(::getpid()),
                         {reinterpret_cast<uint64_t>(garbage.data()), type(0), type(1), type(2)},
                         *layout);
    auto threads = reader.threads();
    if (!threads)
      continue;
    EXPECT_LE(threads->size(), CPythonReader::kMaxThreads);
    for (const auto& thread : *threads) {
      EXPECT_LE(thread.frames.size(), CPythonReader::kMaxFrames);
      for (const auto& frame : thread.frames) {
        EXPECT_FALSE(reader.code(frame.code).has_value());
        EXPECT_FALSE(reader.line(frame).has_value());
      }
    }
  }
  EXPECT_GT(layouts, 0u);
}

} // namespace
} // namespace flamebpf::cpython
