// The web page --listen serves at /, in headless Chromium (tests/browser/page_test.mjs), against
// the real agent profiling two burners, one in a cgroup whose name is markup: the timeline shows
// both, a drag selects a range whose flame graph appears with the burner's frames and the samples
// the stats give those windows, zoom and search work in it, a base and a second range give the
// differential flame graph, and the page fetches nothing from elsewhere. Screenshots go to
// <build>/tests/browser/page/.
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <iostream>
#include <optional>
#include <regex>
#include <sys/stat.h>

#include "dumps/dump_files.h"
#include "harness.h"
#include "process.h"

namespace flamebpf::testing {
namespace {

using namespace std::chrono_literals;

// A cgroup name a container could choose: markup that would run if the page placed it as HTML.
constexpr const char* kHostileName = "<img src=x onerror=\"window.__pwned=1\">'&amp;";

TEST(PageTest, TimelineRangeSearchAndDiffInChromium)
{
  ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
  TempDir dir;
  std::string out = dir.path().string() + "/dumps";
  std::string log = dir.path().string() + "/agent.log";
  TempCgroup web;
  TempCgroup parent;
  std::string hostile = parent.path() + "/" + kHostileName;
  ASSERT_EQ(::mkdir(hostile.c_str(), 0755), 0) << hostile;
  std::string hostile_target = parent.relative_path() + "/" + kHostileName;
  Child burner({copy_burner(dir.path(), "burner_page"), "120"}, web.path());
  Child evil({copy_burner(dir.path(), "burner_evil"), "120"}, hostile);

  Child agent({FLAMEBPF_BINARY, "--cgroup", web.path(), "--cgroup", hostile, "--output-dir", out,
               "--interval", "1", "--listen", "127.0.0.1:0"},
              "", log);
  ASSERT_TRUE(wait_for_text(log, "serving the dumps", 30)) << read_text(log);
  std::smatch match;
  std::string text = read_text(log);
  ASSERT_TRUE(std::regex_search(text, match, std::regex("http://127\\.0\\.0\\.1:([0-9]+)/")))
      << text;
  std::string url = fmt::format("http://127.0.0.1:{}/", match[1].str());
  // About five windows of each, the stats of each written.
  std::string target = web.relative_path();
  for (const auto& name : {target, hostile_target}) {
    ASSERT_TRUE(wait_until(
        [&] { return dumps::list_dumps(out + "/" + dumps::target_directory(name)).size() >= 6; },
        30s, "six windows of dumps of " + name))
        << read_text(log);
  }

  std::string artifacts = BROWSER_ARTIFACTS;
  std::filesystem::remove_all(artifacts);
  auto started = std::chrono::steady_clock::now();
  auto browser =
      run_process({BROWSER_TEST_RUNNER, "page_test.mjs", url, artifacts, "--target", target,
                   "--hostile", hostile_target, "--frame", "c", "--comm", "burner_evil"},
                  {}, 240s);
  auto took =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started);
  std::cout << browser.out << "page_test.mjs took " << took.count() << " s\n";
  EXPECT_EQ(browser.status, 0) << browser.out << browser.err;
  for (const char* screenshot : {"page.png", "range.png", "diff.png", "hostile.png"})
    EXPECT_TRUE(std::filesystem::exists(artifacts + "/" + screenshot)) << screenshot;

  agent.signal(SIGTERM);
  EXPECT_EQ(agent.wait(), 0) << read_text(log);
}

} // namespace
} // namespace flamebpf::testing
