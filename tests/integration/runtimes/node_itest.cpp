// Node.js's JavaScript functions, named from the perf map V8 writes with --perf-basic-prof
// (runtimes/node): each function is one frame whatever tier V8 compiled it in, with its script and
// line, so that the split of two functions' time shows as their work is.
#include <csignal>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <string>

#include "harness.h"
#include "process.h"
#include "temp_dir.h"

namespace flamebpf::testing {
namespace {

namespace fs = std::filesystem;

// heavy does three times light's work per round; both are the same loop.
constexpr const char* kScript =
    R"(function heavy(n) { let s = 0; for (let i = 0; i < n; i++) s += Math.sqrt(i); return s; }
function light(n) { let s = 0; for (let i = 0; i < n; i++) s += Math.sqrt(i); return s; }
const end = Date.now() + Number(process.argv[2]) * 1000;
let total = 0;
while (Date.now() < end) { total += heavy(300000); total += light(100000); }
console.log(total > 0);
)";

TEST(NodeRuntime, JavaScriptFunctionsAreNamedOnceEachAndTheirSplitShows)
{
  TempDir dir;
  std::string script = (dir.path() / "split.js").string();
  std::ofstream(script) << kScript;
  // V8 logs beside its perf map, into the working directory unless told where.
  Child node({"/usr/bin/node", "--perf-basic-prof", "--no-logfile-per-isolate",
              "--logfile=" + (dir.path() / "v8.log").string(), script, "12"});
  wait_until_busy(node.pid(), "node");
  std::string folded_path = (dir.path() / "node.folded").string();
  auto run = run_process({FLAMEBPF_BINARY, "--pid", std::to_string(node.pid()), "-d", "4", "-F",
                          "499", "-o", folded_path},
                         {}, std::chrono::seconds(60));
  ASSERT_EQ(run.status, 0) << run.out << run.err;
  auto stacks = read_folded(folded_path);
  // V8's own names for the functions' code never show; the functions do, as one frame each.
  std::string heavy = "heavy " + script + ":1:";
  std::string light = "light " + script + ":2:";
  uint64_t total = 0, in_heavy = 0, in_light = 0;
  for (const auto& [stack, count] : stacks) {
    total += count;
    EXPECT_EQ(stack.find(";JS:"), std::string::npos) << stack;
    EXPECT_EQ(stack.find(";LazyCompile:"), std::string::npos) << stack;
    in_heavy += stack.find(heavy) != std::string::npos ? count : 0;
    in_light += stack.find(light) != std::string::npos ? count : 0;
  }
  ASSERT_GT(total, 500u) << run.err;
  // Nearly all of the time is in the two functions (the rest: the loop around them, the
  // collector, V8's compilers).
  EXPECT_GT(in_heavy + in_light, total * 6 / 10) << run.err;
  ASSERT_GT(in_light, 0u);
  double ratio = static_cast<double>(in_heavy) / static_cast<double>(in_light);
  EXPECT_GT(ratio, 2.0) << in_heavy << " in heavy, " << in_light << " in light";
  EXPECT_LT(ratio, 4.5) << in_heavy << " in heavy, " << in_light << " in light";
  node.signal(SIGKILL);
  node.wait();
  fs::remove("/tmp/perf-" + std::to_string(node.pid()) + ".map");
}

} // namespace
} // namespace flamebpf::testing
