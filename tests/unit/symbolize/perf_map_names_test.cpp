#include <gtest/gtest.h>

#include "symbolize/name_cut.h"
#include "symbolize/perf_map_names.h"

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

const Frame kTruncatedFrame{"[truncated]", "", FrameKind::kUnknown};

// methods copies of "R.r()" joined as an inline chain.
std::string chain_of(size_t methods)
{
  std::string chain = "R.r()";
  for (size_t i = 1; i < methods; ++i)
    chain += "->R.r()";
  return chain;
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

TEST(PerfMapFrames, InlineChainOfTheBudgetIsWhole)
{
  uint64_t dropped = 0;
  auto frames = perf_map_frames(chain_of(kMaxInlineFrames), false, &dropped);
  ASSERT_EQ(frames.size(), kMaxInlineFrames);
  EXPECT_EQ(frames.front(), jit("R.r"));
  EXPECT_EQ(frames.back(), inlined("R.r"));
  EXPECT_EQ(dropped, 0u);
}

TEST(PerfMapFrames, LongerInlineChainKeepsItsOutermostMethodsAndShowsTheCut)
{
  uint64_t dropped = 0;
  auto frames = perf_map_frames(chain_of(9300), false, &dropped);
  ASSERT_EQ(frames.size(), kMaxInlineFrames + 1);
  EXPECT_EQ(frames.front(), jit("R.r"));
  EXPECT_EQ(frames[kMaxInlineFrames - 1], inlined("R.r"));
  EXPECT_EQ(frames.back(), kTruncatedFrame);
  EXPECT_EQ(dropped, 9300 - kMaxInlineFrames);
}

TEST(PerfMapFrames, ChainTheReaderCutShowsTheCut)
{
  // What the perf-map reader keeps of a name over its budget.
  EXPECT_EQ(perf_map_frames("A.a()->B.b()->[truncated]", false),
            (std::vector<Frame>{jit("A.a"), inlined("B.b"), kTruncatedFrame}));
  EXPECT_EQ(perf_map_frames("[truncated]", false), std::vector<Frame>{kTruncatedFrame});
  // Not Java: the name as it is, cut included.
  EXPECT_EQ(perf_map_frames("Interpreter with a very long na[truncated]", false),
            std::vector<Frame>{vm("Interpreter with a very long na[truncated]")});
}

} // namespace
} // namespace flamebpf::symbolize
