// The CPython runtime finds a real interpreter in a process it captures, and names the frames the
// walk leaves (code objects' addresses and code units) "qualified.name (file.py:first line)", at
// the line of the unit, reading each code object's names and location table once, charged to the
// process's target; what is no code object is a frame unread, and a process with no CPython is not
// the runtime's.
#include <gtest/gtest.h>
#include <memory>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "runtimes/cpython/cpython_reader.h"
#include "runtimes/cpython/cpython_runtime.h"
#include "runtimes/cpython_abi.h"
#include "symbolize/process_table.h"
#include "waiting_python.h"

namespace flamebpf::cpython {
namespace {

class CPythonRuntimeTest : public ::testing::TestWithParam<std::string> {
protected:
  WaitingPython waiter_;
};

TEST_P(CPythonRuntimeTest, FramesAreNamedByTheirCodeObjectsReadOnce)
{
  std::string python = WaitingPython::python(GetParam());
  if (python.empty())
    GTEST_SKIP() << "no " << GetParam() << " here";
  ASSERT_NO_FATAL_FAILURE(waiter_.start(python));
  auto pid = static_cast<uint32_t>(waiter_.pid());

  symbolize::ProcessTable processes;
  auto owned = std::make_unique<CPythonRuntime>();
  CPythonRuntime* runtime = owned.get();
  processes.add_runtime(std::move(owned));
  symbolize::ImageKey key{pid, 1};
  processes.capture(key, "");
  const FoundCPython* found = runtime->found(key);
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->file.major, 3u);
  EXPECT_EQ(found->file.minor, WaitingPython::minor_version(GetParam()));
  // What the frame walk is given: the interpreter's state in this process, its evaluation loop
  // and the process's pid namespace.
  auto walks = runtime->take_process_walks();
  ASSERT_EQ(walks.size(), 1u);
  EXPECT_EQ(walks[0].pid, pid);
  EXPECT_EQ(walks[0].image_id, key.image_id);
  ASSERT_TRUE(walks[0].cpython);
  const fb_cpython_process& walk = *walks[0].cpython;
  EXPECT_EQ(walk.interpreters_head,
            found->in_process.runtime + found->layout.runtime_interpreters_head);
  EXPECT_EQ(walk.gil_holder, found->layout.runtime_gil_holder != kNoField
                                 ? found->in_process.runtime + found->layout.runtime_gil_holder
                                 : 0);
  EXPECT_LT(walk.eval_start, walk.eval_end);
  EXPECT_EQ(walk.frame_code, found->layout.frame_code);
  EXPECT_EQ(walk.frame_instruction, found->layout.frame_instruction);
  EXPECT_EQ(walk.code_instructions, found->layout.code_instructions);
  EXPECT_EQ(walk.thread_native_id, found->layout.thread_native_id);
  struct stat pid_namespace {};
  ASSERT_EQ(::stat(("/proc/" + std::to_string(pid) + "/ns/pid").c_str(), &pid_namespace), 0);
  EXPECT_EQ(walk.pid_namespace_inode, pid_namespace.st_ino);
  EXPECT_TRUE(runtime->take_process_walks().empty());

  // The frames the walk would leave: the main thread's, found as the reader finds them.
  CPythonReader reader(pid, found->in_process, found->layout);
  auto threads = reader.threads();
  ASSERT_TRUE(threads) << threads.error().message;
  const PythonThread* main_thread = nullptr;
  for (const auto& thread : *threads)
    if (thread.native_id == pid)
      main_thread = &thread;
  ASSERT_NE(main_thread, nullptr);
  std::vector<std::string> names;
  std::vector<uint32_t> lines;
  for (const auto& frame : main_thread->frames) {
    auto named = runtime->name_marker(processes, key, FB_FRAME_RUNTIME_MARKER | frame.code);
    ASSERT_TRUE(named);
    EXPECT_EQ(named->kind, profile::FrameKind::kInterpreted);
    EXPECT_EQ(named->line, 0u); // no code unit: no line of its own
    names.push_back(named->name);
    // With the code unit the walk leaves: the line of the call each frame is at, as the reader
    // reads it from the location table, and the same name.
    uint64_t unit_field = uint64_t{frame.instruction} + 1;
    auto at_unit = runtime->name_marker(
        processes, key, FB_FRAME_RUNTIME_MARKER | unit_field << FB_CPYTHON_UNIT_SHIFT | frame.code);
    ASSERT_TRUE(at_unit);
    EXPECT_EQ(at_unit->name, named->name);
    lines.push_back(at_unit->line);
  }
  const std::string& script = waiter_.script();
  EXPECT_EQ(names,
            (std::vector<std::string>{"inner_wait (" + script + ":12)", "outer (" + script + ":17)",
                                      "<module> (" + script + ":1)"}));
  EXPECT_EQ(lines, (std::vector<uint32_t>{14, 18, 24}));
  // Held once per code object, charged to the process's target.
  uint64_t held = processes.memory_account().breakdown().of(MemoryKind::kPythonCode);
  EXPECT_GT(held, 0u);
  for (const auto& frame : main_thread->frames)
    ASSERT_TRUE(runtime->name_marker(processes, key, FB_FRAME_RUNTIME_MARKER | frame.code));
  EXPECT_EQ(processes.memory_account().breakdown().of(MemoryKind::kPythonCode), held);
  // In the next generation, each is checked to be the same code object, and named the same.
  processes.end_generation();
  for (size_t i = 0; i < names.size(); ++i) {
    auto named = runtime->name_marker(processes, key,
                                      FB_FRAME_RUNTIME_MARKER | main_thread->frames.at(i).code);
    ASSERT_TRUE(named);
    EXPECT_EQ(named->name, names[i]);
  }
  EXPECT_EQ(processes.memory_account().breakdown().of(MemoryKind::kPythonCode), held);

  // An address that holds no code object: its frame is unread, and nothing is kept of it.
  auto garbage = runtime->name_marker(processes, key, FB_FRAME_RUNTIME_MARKER | 0x1000);
  ASSERT_TRUE(garbage);
  EXPECT_EQ(garbage->name, CPythonRuntime::kUnreadFrame);
  EXPECT_EQ(processes.memory_account().breakdown().of(MemoryKind::kPythonCode), held);
  // A code address is no marker, and the frames of a process with no CPython are not its own.
  EXPECT_FALSE(runtime->name_marker(processes, key, main_thread->frames.at(0).code));
  symbolize::ImageKey own{static_cast<uint32_t>(::getpid()), 1};
  processes.capture(own, "");
  EXPECT_EQ(runtime->found(own), nullptr);
  EXPECT_FALSE(runtime->name_marker(processes, own, FB_FRAME_RUNTIME_MARKER | 0x1000));

  // Forgotten with its process: what it held is given back.
  runtime->forget(key, true);
  EXPECT_EQ(runtime->found(key), nullptr);
  walks = runtime->take_process_walks();
  ASSERT_EQ(walks.size(), 1u);
  EXPECT_EQ(walks[0].pid, pid);
  EXPECT_FALSE(walks[0].cpython);
  EXPECT_EQ(processes.memory_account().breakdown().of(MemoryKind::kPythonCode), 0u);
}

// The walk reads a frame's fields in one read of FB_CPYTHON_FRAME_SPAN bytes from its code
// object's field: each verified layout's fit, and one whose fields lie past the span is refused.
TEST(CPythonFrameSpan, EveryVerifiedLayoutFitsAndOneBeyondDoesNot)
{
  size_t verified = 0;
  for (uint32_t minor = 0; minor < 20; ++minor) {
    auto layout = verified_layout(3, minor);
    if (!layout)
      continue;
    ++verified;
    EXPECT_TRUE(fits_frame_span(*layout)) << "3." << minor;
    CPythonLayout beyond = *layout;
    beyond.frame_previous = beyond.frame_code + FB_CPYTHON_FRAME_SPAN - 7;
    EXPECT_FALSE(fits_frame_span(beyond));
    beyond = *layout;
    (beyond.frame_is_entry != kNoField ? beyond.frame_is_entry : beyond.frame_owner) =
        beyond.frame_code + FB_CPYTHON_FRAME_SPAN;
    EXPECT_FALSE(fits_frame_span(beyond));
    beyond = *layout;
    beyond.frame_previous = beyond.frame_code - 8;
    EXPECT_FALSE(fits_frame_span(beyond));
    beyond = *layout;
    beyond.frame_instruction = beyond.frame_code + FB_CPYTHON_FRAME_SPAN - 4;
    EXPECT_FALSE(fits_frame_span(beyond));
  }
  EXPECT_GT(verified, 0u);
}

INSTANTIATE_TEST_SUITE_P(Interpreters,
                         CPythonRuntimeTest,
                         ::testing::ValuesIn(WaitingPython::interpreters()));

} // namespace
} // namespace flamebpf::cpython
