// Flame graphs from the command line: recording to an SVG, `flamebpf render` and `flamebpf diff`.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <thread>
#include <unistd.h>

#include "harness.h"

namespace flamebpf::testing {
namespace {

// xmllint's complaints about the file, "" if well-formed.
std::string xml_problems(const std::string& path)
{
  TempDir dir;
  std::string log = dir.path().string() + "/xmllint";
  Child lint({"/usr/bin/xmllint", "--noout", path}, "", log);
  int code = lint.wait();
  std::string output = read_text(log);
  return code == 0 ? "" : "xmllint exit " + std::to_string(code) + ": " + output;
}

class RenderTest : public ::testing::Test {
protected:
  void write(const std::string& name, const std::string& content)
  {
    std::ofstream(dir_.path().string() + "/" + name) << content;
  }
  std::string path(const std::string& name) const { return dir_.path().string() + "/" + name; }
  TempDir dir_;
};

TEST_F(RenderTest, RecordingWritesAnSvgFlameGraph)
{
  ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
  TempCgroup target;
  auto busy = copy_burner(dir_.path(), "burner_svg");
  Child workload({busy, "15"}, target.path());
  wait_until_busy(workload.pid(), "burner_svg");
  auto run = run_flamebpf(
      {"--cgroup", target.path(), "-d", "2", "-o", path("rec.svg"), "--title", "Burner <&> test"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::string svg = read_text(path("rec.svg"));
  EXPECT_EQ(xml_problems(path("rec.svg")), "");
  EXPECT_NE(svg.find(">Burner &lt;&amp;&gt; test</text>"), std::string::npos);
  EXPECT_NE(svg.find("data-n=\"burner_svg\""), std::string::npos);
  for (const char* frame : {"main", "run", "a", "b", "c"})
    EXPECT_NE(svg.find(std::string("data-n=\"") + frame + "\""), std::string::npos) << frame;
  // The subtitle says what was profiled: target, time range, frequency, samples.
  EXPECT_NE(svg.find("99 Hz"), std::string::npos);
  EXPECT_NE(svg.find(" UTC"), std::string::npos);
}

TEST_F(RenderTest, DefaultOutputIsFoldedWithAnSvgBeside)
{
  ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
  std::string previous = std::filesystem::current_path();
  std::filesystem::current_path(dir_.path());
  auto run = run_flamebpf({"-d", "1"});
  std::filesystem::current_path(previous);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  int folded = 0;
  int svg = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
    std::string name = entry.path().filename();
    folded += name.starts_with("flamebpf-") && name.ends_with(".folded");
    if (name.starts_with("flamebpf-") && name.ends_with(".svg")) {
      ++svg;
      EXPECT_EQ(xml_problems(entry.path()), "");
    }
  }
  EXPECT_EQ(folded, 1) << run.output;
  EXPECT_EQ(svg, 1) << run.output;
}

TEST_F(RenderTest, RenderSumsFoldedFilesFromAnyProducer)
{
  // flamebpf's own, flamegraph.pl's stackcollapse (spaces in names), and inferno's.
  write("a.folded", "java;main;Foo.bar_[j] 3\njava;main;read_[k] 1\n");
  write("b.folded", "perf-1234;[unknown];std::map<int, int>::find 2\njava;main;Foo.bar_[j] 4\n");
  auto run = run_flamebpf({"render", path("a.folded"), path("b.folded"), "-o", path("r.svg"),
                           "--width", "900", "--inverted"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::string svg = read_text(path("r.svg"));
  EXPECT_EQ(xml_problems(path("r.svg")), "");
  EXPECT_NE(svg.find("width=\"900\""), std::string::npos);
  EXPECT_NE(svg.find("data-inverted=\"1\""), std::string::npos);
  EXPECT_NE(svg.find("data-total=\"10\""), std::string::npos);
  // 7 samples at depth 3 of the icicle: y = 60 + 3 * 16.
  EXPECT_NE(svg.find("data-w=\"7\" data-n=\"Foo.bar\"><rect x=\"10\" y=\"108\""), std::string::npos)
      << svg;
  EXPECT_NE(svg.find("data-n=\"std::map&lt;int, int&gt;::find\""), std::string::npos);

  // Folded output sums them instead.
  auto folded =
      run_flamebpf({"render", path("a.folded"), path("b.folded"), "-o", path("r.folded")});
  ASSERT_EQ(folded.exit_code, 0) << folded.output;
  EXPECT_EQ(read_folded(path("r.folded")).at("java;main;Foo.bar_[j]"), 7u);
}

TEST_F(RenderTest, RenderReportsBadLinesAndMissingFiles)
{
  write("bad.folded", "ok;stack 2\nnot a folded line\n");
  auto run = run_flamebpf({"render", path("bad.folded"), "-o", path("r.svg")});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("skipped 1 lines"), std::string::npos) << run.output;
  auto missing = run_flamebpf({"render", path("nope.folded"), "-o", path("r2.svg")});
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("cannot open " + path("nope.folded")), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(path("r2.svg")));
}

TEST_F(RenderTest, DiffAsSvgAndAsTwoColumnFolded)
{
  write("before.folded", "p;a 10\np;b 30\n");
  write("after.folded", "p;a 40\np;c 40\n");
  auto run = run_flamebpf(
      {"diff", path("before.folded"), path("after.folded"), "-o", path("d.svg"), "--normalize"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::string svg = read_text(path("d.svg"));
  EXPECT_EQ(xml_problems(path("d.svg")), "");
  EXPECT_NE(svg.find("data-mode=\"diff\""), std::string::npos);
  // Normalized: before is scaled to after's 80 samples, so a goes from 20 to 40.
  EXPECT_NE(svg.find("data-b=\"20\" data-a=\"40\" data-n=\"a\""), std::string::npos) << svg;
  auto negated = run_flamebpf(
      {"diff", path("before.folded"), path("after.folded"), "-o", path("n.svg"), "--negate"});
  ASSERT_EQ(negated.exit_code, 0) << negated.output;
  EXPECT_NE(read_text(path("n.svg")).find("data-n=\"b\""), std::string::npos);
  auto folded =
      run_flamebpf({"diff", path("before.folded"), path("after.folded"), "-o", path("d.folded")});
  ASSERT_EQ(folded.exit_code, 0) << folded.output;
  EXPECT_EQ(read_text(path("d.folded")), "p;a 10 40\np;b 30 0\np;c 0 40\n");
}

} // namespace
} // namespace flamebpf::testing
