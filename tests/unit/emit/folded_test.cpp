#include <gtest/gtest.h>
#include <sstream>

#include "emit/folded.h"
#include "test_support.h"

namespace flamebpf::emit {
namespace {

using profile::Frame;
using profile::FrameKind;
using profile::Stack;
using profile::SymbolizedProfile;

Frame native(const std::string& name)
{
  return {name, "/usr/bin/burner", FrameKind::kNative};
}

Frame kernel(const std::string& name)
{
  return {name, "", FrameKind::kKernel};
}

Frame unknown(const std::string& name)
{
  return {name, "", FrameKind::kUnknown};
}

// Stacks in no particular order, as the symbolizer may produce them; tests/data/folded/
// expected.folded holds the output, written by hand.
SymbolizedProfile sample_profile()
{
  SymbolizedProfile profile;
  profile.frequency_hz = 99;
  profile.stacks = {
      {300,
       "java",
       "",
       {native("Interpreter"), unknown("libjvm.so+0x1234"), native("a;b"), kernel("page_fault\n")},
       2},
      {100,
       "burner",
       "",
       {native("main"), native("run"), native("a"), kernel("entry_SYSCALL_64"),
        kernel("do_syscall_64")},
       5},
      {0, "swapper/0", "", {kernel("cpu_startup_entry"), kernel("do_idle")}, 9},
      {100, "burner", "", {native("main"), native("run"), native("b")}, 3},
      {100,
       "burner",
       "",
       {native("main"), native("run"), native("b"), kernel("[kernel stack lost]")},
       2},
      {400, "", "", {native(""), unknown("[unknown]")}, 1},
      // Same names as pid 100's first stack: folds into the same line.
      {200,
       "burner",
       "container-a",
       {native("main"), native("run"), native("a"), kernel("entry_SYSCALL_64"),
        kernel("do_syscall_64")},
       7},
      {500, "we;ird\tname", "", {native("start"), native("x\ry")}, 4},
      {600, "x", "", {native("f"), kernel("")}, 1},
  };
  return profile;
}

TEST(FoldedEmitter, MatchesGoldenFile)
{
  FoldedEmitter emitter;
  std::ostringstream out;
  auto written = emitter.write(sample_profile(), out);
  ASSERT_TRUE(written.has_value()) << written.error().message;
  EXPECT_EQ(out.str(), flamebpf::testing::read_data("folded/expected.folded"));
}

TEST(FoldedEmitter, EmptyProfileWritesNothing)
{
  FoldedEmitter emitter;
  std::ostringstream out;
  ASSERT_TRUE(emitter.write(SymbolizedProfile{}, out).has_value());
  EXPECT_EQ(out.str(), "");
}

TEST(FoldedEmitter, FailedStreamIsAnError)
{
  FoldedEmitter emitter;
  std::ostringstream out;
  out.setstate(std::ios::badbit);
  auto written = emitter.write(sample_profile(), out);
  ASSERT_FALSE(written.has_value());
  EXPECT_NE(written.error().message.find("write failed"), std::string::npos);
}

TEST(FoldedFrame, KernelSuffixAndSanitizing)
{
  EXPECT_EQ(folded_frame(kernel("do_idle")), "do_idle_[k]");
  EXPECT_EQ(folded_frame(native("do_idle")), "do_idle");
  EXPECT_EQ(folded_frame(unknown("libc.so.6+0x10")), "libc.so.6+0x10");
  EXPECT_EQ(folded_frame(native("a;b;c")), "a:b:c");
  EXPECT_EQ(folded_frame(native(std::string("a\nb\r\tc\0d", 8))), "a b  c d");
  // One line of UTF-8 text: no control character for a terminal, no byte outside valid UTF-8.
  EXPECT_EQ(folded_frame(native("ctl\x01\x1b[31mred\x7f")), "ctl  [31mred ");
  EXPECT_EQ(
      folded_frame(native("caf\xC3\xA9 \xff\xfe\xc0\x80 \xe2\x82")),
      "caf\xC3\xA9 \xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD \xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(folded_frame(native("")), "[unknown]");
  EXPECT_EQ(folded_frame(kernel("")), "[unknown]_[k]");
}

TEST(FoldedFrame, InterpretedMethodsHaveNoSuffix)
{
  // flamegraph.pl's java palette: _[j] compiled, _[i] inlined, nothing for an interpreted method.
  EXPECT_EQ(folded_frame({"org.example.Foo.bar", "", FrameKind::kInterpreted}),
            "org.example.Foo.bar");
  EXPECT_EQ(folded_frame({"org.example.Foo.bar", "", FrameKind::kJit}), "org.example.Foo.bar_[j]");
}

TEST(FoldedStack, CommThenFramesRootFirst)
{
  Stack stack{1, "burner", "", {native("main"), native("run"), kernel("tick")}, 3};
  EXPECT_EQ(folded_stack(stack), "burner;main;run;tick_[k]");
  stack.comm = "a;b\n";
  stack.frames.clear();
  EXPECT_EQ(folded_stack(stack), "a:b ");
  stack.comm = "";
  EXPECT_EQ(folded_stack(stack), "[unknown]");
}

TEST(FoldedStack, TargetFrameComesBeforeTheProcess)
{
  Stack stack{1, "burner", "web", {native("main"), native("run")}, 3};
  EXPECT_EQ(folded_stack(stack, true), "web;burner;main;run");
  stack.target = "evil;name\n";
  EXPECT_EQ(folded_stack(stack, true), "evil:name ;burner;main;run");
}

TEST(FoldedEmitter, TargetFrameSeparatesTargetsOfTheSameStack)
{
  SymbolizedProfile profile;
  profile.stacks = {{1, "burner", "web", {native("main")}, 3},
                    {2, "burner", "db", {native("main")}, 4},
                    {3, "burner", "web", {native("main")}, 1}};
  std::ostringstream merged;
  ASSERT_TRUE(FoldedEmitter().write(profile, merged).has_value());
  EXPECT_EQ(merged.str(), "burner;main 8\n");
  std::ostringstream separated;
  ASSERT_TRUE(FoldedEmitter(true).write(profile, separated).has_value());
  EXPECT_EQ(separated.str(), "db;burner;main 4\nweb;burner;main 4\n");
}

} // namespace
} // namespace flamebpf::emit
