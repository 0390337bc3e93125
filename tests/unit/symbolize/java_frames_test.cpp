#include <gtest/gtest.h>

#include "symbolize/java_frames.h"

namespace flamebpf::symbolize {
namespace {

using profile::Frame;
using profile::FrameKind;

Frame jit(const std::string& name)
{
  return {name, "", FrameKind::kJit};
}

Frame inlined(const std::string& name)
{
  return {name, "", FrameKind::kInlined};
}

Frame vm(const std::string& name)
{
  return {name, "", FrameKind::kNative};
}

TEST(PerfMapFrames, OneDisplayFormForEveryProducer)
{
  std::vector<Frame> expected{jit("org.example.Foo.bar")};
  EXPECT_EQ(perf_map_frames("long org.example.Foo.bar(long, int[])", false), expected); // JDK
  EXPECT_EQ(perf_map_frames("org.example.Foo.bar(long, int[])", false), expected);      // our agent
  EXPECT_EQ(perf_map_frames("Lorg/example/Foo;::bar", false), expected);       // perf-map-agent
  EXPECT_EQ(perf_map_frames("org.example.Foo::bar", false), expected);         // its dottedclass
  EXPECT_EQ(perf_map_frames("Lorg/example/Foo;::bar(J[I)J", false), expected); // its sig option
}

TEST(PerfMapFrames, SignaturesOnRequest)
{
  std::vector<Frame> expected{jit("org.example.Foo.bar(long, int[])")};
  EXPECT_EQ(perf_map_frames("long org.example.Foo.bar(long, int[])", true), expected);
  EXPECT_EQ(perf_map_frames("org.example.Foo.bar(long, int[])", true), expected);
  EXPECT_EQ(perf_map_frames("Lorg/example/Foo;::bar(J[I)J", true), expected);
}

TEST(PerfMapFrames, InlinedMethodsBecomeFramesOutermostFirst)
{
  EXPECT_EQ(perf_map_frames("App.run()->App.parse(java.lang.String)->Codec.decode(byte[])", false),
            (std::vector<Frame>{jit("App.run"), inlined("App.parse"), inlined("Codec.decode")}));
  EXPECT_EQ(
      perf_map_frames("Lorg/example/Service;::handle->Lorg/example/Codec;::decode", false),
      (std::vector<Frame>{jit("org.example.Service.handle"), inlined("org.example.Codec.decode")}));
}

TEST(PerfMapFrames, NestedLambdaAndHiddenClasses)
{
  EXPECT_EQ(perf_map_frames("void org.example.Outer$Inner.<init>()", false),
            std::vector<Frame>{jit("org.example.Outer$Inner.<init>")});
  EXPECT_EQ(perf_map_frames("long Hot$$Lambda/0x0000000035040210.applyAsLong(long)", false),
            std::vector<Frame>{jit("Hot$$Lambda/0x0000000035040210.applyAsLong")});
  EXPECT_EQ(perf_map_frames("Hot.lambda$main$0(long)", false),
            std::vector<Frame>{jit("Hot.lambda$main$0")});
}

TEST(PerfMapFrames, VmNamesStayAsTheyAre)
{
  for (const char* name :
       {"Interpreter", "StubRoutines (1)", "I2C/C2I adapters", "flush_icache_stub",
        "StubRoutines::call_stub ", "LazyCompile:*foo a.js:1", "a->b", "(weird)", ".x()", "x.()"}) {
    EXPECT_EQ(perf_map_frames(name, false), std::vector<Frame>{vm(name)}) << name;
  }
}

} // namespace
} // namespace flamebpf::symbolize
