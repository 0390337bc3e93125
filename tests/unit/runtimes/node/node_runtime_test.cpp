#include <gtest/gtest.h>

#include "runtimes/node/node_runtime.h"

namespace flamebpf::node {
namespace {

using profile::Frame;
using profile::FrameKind;

TEST(NodeFrames, AFunctionIsOneFrameWhateverItsTier)
{
  EXPECT_EQ(node_frame("JS:*heavy /srv/app.js:1:15"),
            (Frame{"heavy /srv/app.js:1:15", "", FrameKind::kJit}));
  EXPECT_EQ(node_frame("JS:^heavy /srv/app.js:1:15"),
            (Frame{"heavy /srv/app.js:1:15", "", FrameKind::kJit}));
  EXPECT_EQ(node_frame("JS:+heavy /srv/app.js:1:15"),
            (Frame{"heavy /srv/app.js:1:15", "", FrameKind::kJit}));
  // Node 18's V8 names the kind of code instead.
  EXPECT_EQ(node_frame("LazyCompile:*heavy /srv/app.js:1:15"),
            (Frame{"heavy /srv/app.js:1:15", "", FrameKind::kJit}));
  // Not optimized: the interpreter's or the baseline's code.
  EXPECT_EQ(node_frame("JS:~heavy /srv/app.js:1:15"),
            (Frame{"heavy /srv/app.js:1:15", "", FrameKind::kInterpreted}));
}

TEST(NodeFrames, AnonymousFunctionsBuiltinsAndCutNamesKeepTheirMeaning)
{
  EXPECT_EQ(node_frame("JS:~ /srv/app.js:3:10"),
            (Frame{"(anonymous) /srv/app.js:3:10", "", FrameKind::kInterpreted}));
  EXPECT_EQ(node_frame("Builtin:ArrayPrototypePush"),
            (Frame{"Builtin:ArrayPrototypePush", "", FrameKind::kJit}));
  EXPECT_EQ(node_frame("JS:"), (Frame{"JS:", "", FrameKind::kJit}));
  EXPECT_EQ(node_frame("[truncated]"), (Frame{"[truncated]", "", FrameKind::kUnknown}));
  // A name that is only a tier mark.
  EXPECT_EQ(node_frame("JS:*"), (Frame{"(anonymous)", "", FrameKind::kJit}));
}

} // namespace
} // namespace flamebpf::node
