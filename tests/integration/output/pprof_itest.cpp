// pprof output read by the reference reader, `go tool pprof` (Debian's golang-go): it lists the
// same functions with the same flat and cumulative sample counts as the folded file of the same
// profile, and shows the pid, comm and container labels.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "emit/folded.h"
#include "emit/pprof.h"
#include "harness.h"
#include "pprof_tool.h"
#include "profile/folded_reader.h"

namespace flamebpf::testing {
namespace {

using profile::Frame;
using profile::FrameKind;
using profile::SymbolizedProfile;

class PprofToolTest : public ::testing::Test {
protected:
  void SetUp() override
  {
    go_ = find_go();
    ASSERT_FALSE(go_.empty())
        << "go not found on PATH: these tests read profiles with `go tool pprof`; install "
           "Debian's golang-go (scripts/install-deps.sh --test)";
  }

  std::string path(const std::string& name) const { return dir_.path().string() + "/" + name; }

  void write_pprof(const SymbolizedProfile& profile, const std::string& file)
  {
    std::ofstream out(file, std::ios::binary);
    auto written = emit::PprofEmitter().write(profile, out);
    ASSERT_TRUE(written.has_value()) << written.error().message;
  }

  std::string pprof(const std::vector<std::string>& args, const std::string& file)
  {
    return PprofTool(go_, dir_.path()).run(args, file);
  }

  std::map<std::string, Counts> top(const std::vector<std::string>& args, const std::string& file)
  {
    return PprofTool(go_, dir_.path()).top(args, file);
  }

  std::string go_;
  TempDir dir_;
};

Frame native(const std::string& name, const std::string& module = "/usr/bin/burner")
{
  return {name, module, FrameKind::kNative};
}

Frame kernel(const std::string& name, const std::string& module = "")
{
  return {name, module, FrameKind::kKernel};
}

// Two processes of one program, one of them in a container; a JVM with JIT-compiled and inlined
// methods; kernel and module frames; recursion; unnamed code; an idle CPU without a stack.
SymbolizedProfile built_profile()
{
  const std::string libc = "/usr/lib/x86_64-linux-gnu/libc.so.6";
  const std::string java = "/usr/lib/jvm/java-17-openjdk-amd64/bin/java";
  Frame jit_loop{"Burner.loop(long)", "", FrameKind::kJit};
  Frame jit_a{"Burner.a(long, int)", "", FrameKind::kJit};
  Frame inlined_a{"Burner.a(long, int)", "", FrameKind::kInlined};
  Frame inlined_b{"Burner.b()", "", FrameKind::kInlined};
  SymbolizedProfile profile;
  profile.frequency_hz = 99;
  profile.start = std::chrono::system_clock::now() - std::chrono::milliseconds(2500);
  profile.end = profile.start + std::chrono::milliseconds(2500);
  profile.stacks = {
      {100,
       "burner",
       "",
       {native("__libc_start_call_main", libc), native("main"), native("run"), native("a"),
        native("b"), native("c")},
       50},
      {100,
       "burner",
       "",
       {native("__libc_start_call_main", libc), native("main"), native("run"), native("a"),
        kernel("asm_sysvec_apic_timer_interrupt"), kernel("sysvec_apic_timer_interrupt")},
       6},
      {101,
       "burner",
       "web",
       {native("__libc_start_call_main", libc), native("main"), native("run"), native("a"),
        native("b"), native("c")},
       20},
      {101,
       "burner",
       "web",
       {native("main"), native("fib"), native("fib"), native("fib"),
        native("std::vector<int, std::allocator<int> >::push_back(int const&)",
               "/usr/lib/x86_64-linux-gnu/libstdc++.so.6")},
       9},
      {200,
       "java",
       "",
       {native("main", java),
        {"libjvm.so+0x5e3a10", "/usr/lib/libjvm.so", FrameKind::kUnknown},
        {"Interpreter", "", FrameKind::kNative},
        jit_loop,
        inlined_a,
        inlined_b},
       30},
      {200, "java", "", {native("main", java), jit_loop, inlined_a}, 4},
      {200, "java", "", {native("main", java), jit_loop, jit_a}, 3},
      {200,
       "java",
       "",
       {native("main", java),
        {"[unknown]", "", FrameKind::kUnknown},
        kernel("entry_SYSCALL_64"),
        kernel("nft_do_chain", "nf_tables")},
       2},
      {0, "swapper/0", "", {}, 11},
      {0, "swapper/1", "", {kernel("do_idle"), kernel("main")}, 5},
  };
  profile.build_ids = {{"/usr/bin/burner", "4fd2d5a4b1c7e0f9"}};
  return profile;
}

TEST_F(PprofToolTest, TopListsTheFoldedFilesFunctionsWithItsCounts)
{
  SymbolizedProfile profile = built_profile();
  {
    std::ofstream folded(path("p.folded"));
    ASSERT_TRUE(emit::FoldedEmitter().write(profile, folded).has_value());
  }
  write_pprof(profile, path("p.pb.gz"));
  auto expected = folded_counts(read_folded(path("p.folded")));
  ASSERT_LT(expected.size(), 50u) << "more functions than -nodecount shows";

  // -nodefraction=0: pprof would otherwise hide functions under 0.5% of the samples.
  auto samples =
      top({"-top", "-nodecount=50", "-nodefraction=0", "-sample_index=samples"}, path("p.pb.gz"));
  EXPECT_EQ(samples, expected);
  EXPECT_EQ(samples["burner"], (Counts{0, 85}));
  EXPECT_EQ(samples["c"], (Counts{70, 70}));
  EXPECT_EQ(samples["fib"], (Counts{0, 9}));    // recursion counts once
  EXPECT_EQ(samples["main"], (Counts{5, 129})); // a kernel "main" too, as in the folded file

  // The default value is CPU time: one period, 1e9 / 99 ns rounded, per sample.
  auto cpu = top({"-top", "-nodecount=50", "-nodefraction=0", "-unit=ns"}, path("p.pb.gz"));
  ASSERT_EQ(cpu.size(), expected.size());
  for (const auto& [name, counts] : expected)
    EXPECT_EQ(cpu[name], (Counts{counts.flat * 10'101'010, counts.cum * 10'101'010})) << name;

  std::string header = pprof({"-top", "-nodecount=1"}, path("p.pb.gz"));
  EXPECT_NE(header.find("File: burner\n"), std::string::npos) << header;
  EXPECT_NE(header.find("Build ID: 4fd2d5a4b1c7e0f9\n"), std::string::npos) << header;
  EXPECT_NE(header.find("Type: cpu\n"), std::string::npos) << header;
  EXPECT_NE(header.find("Duration: 2.50s"), std::string::npos) << header;
}

TEST_F(PprofToolTest, TracesAreTheStacksWithTheirLabels)
{
  SymbolizedProfile profile = built_profile();
  write_pprof(profile, path("p.pb.gz"));
  // "container|pid|comm;root;...;leaf" -> samples, from the profile and from -traces.
  std::map<std::string, uint64_t> expected;
  for (const auto& stack : profile.stacks) {
    std::string key = (stack.target.empty() ? "host" : stack.target) + "|" +
                      std::to_string(stack.pid) + "|" + stack.comm;
    for (const auto& frame : stack.frames)
      key += ";" + frame.name;
    expected[key] += stack.count;
  }

  std::string output = pprof({"-traces", "-sample_index=samples"}, path("p.pb.gz"));
  std::map<std::string, uint64_t> traces;
  std::stringstream lines(output);
  std::string line;
  std::map<std::string, std::string> labels;
  std::vector<std::string> frames; // leaf first
  uint64_t count = 0;
  auto end_trace = [&] {
    if (frames.empty())
      return;
    std::string key = labels["target"] + "|" + labels["pid"] + "|";
    for (auto frame = frames.rbegin(); frame != frames.rend(); ++frame)
      key += (frame == frames.rbegin() ? "" : ";") + *frame;
    EXPECT_EQ(labels["comm"], frames.back()) << "the comm label names the root frame";
    traces[key] += count;
    labels.clear();
    frames.clear();
  };
  bool started = false;
  while (std::getline(lines, line)) {
    if (line.starts_with("-----------+")) {
      end_trace();
      started = true;
      continue;
    }
    if (!started || line.empty())
      continue;
    std::stringstream row(line);
    std::string first;
    row >> first;
    std::string rest;
    std::getline(row >> std::ws, rest);
    if (!frames.empty()) {
      frames.push_back(without_inline_note(std::string(line.substr(line.find_first_not_of(' ')))));
    } else if (first.ends_with(':')) {
      labels[first.substr(0, first.size() - 1)] = rest;
    } else {
      count = std::stoull(first);
      frames.push_back(without_inline_note(rest));
    }
  }
  end_trace();
  EXPECT_EQ(traces, expected) << output;
}

TEST_F(PprofToolTest, TagsShowPidCommTargetPodAndNode)
{
  SymbolizedProfile profile = built_profile();
  profile.node = "node-7";
  const std::string id(64, 'a');
  profile.target_labels["web"] = {"web", id, "prod", "shop-7d9f"};
  write_pprof(profile, path("p.pb.gz"));
  std::map<std::string, uint64_t> expected; // "key=value" -> samples
  for (const auto& stack : profile.stacks) {
    expected["pid=" + std::to_string(stack.pid)] += stack.count;
    expected["comm=" + stack.comm] += stack.count;
    expected["target=" + (stack.target.empty() ? "host" : stack.target)] += stack.count;
    expected["node=node-7"] += stack.count;
    if (stack.target == "web") {
      for (const char* tag : {"container=web", "namespace=prod", "pod=shop-7d9f"})
        expected[tag] += stack.count;
      expected["container_id=" + id] += stack.count;
    }
  }
  ASSERT_TRUE(expected.contains("pid=0")); // pprof drops unitless numeric labels of 0

  std::string output = pprof({"-tags", "-sample_index=samples"}, path("p.pb.gz"));
  std::map<std::string, uint64_t> tags;
  std::stringstream lines(output);
  std::string line;
  std::string key;
  while (std::getline(lines, line)) {
    // " comm: Total 140.0", then "  85.0 (60.71%): burner" per value.
    std::stringstream row(line);
    std::string first;
    row >> first;
    if (line.find(": Total ") != std::string::npos && first.ends_with(':')) {
      key = first.substr(0, first.size() - 1);
      continue;
    }
    size_t colon = line.find("): ");
    if (key.empty() || colon == std::string::npos)
      continue;
    tags[key + "=" + line.substr(colon + 3)] += static_cast<uint64_t>(std::stod(first) + 0.5);
  }
  EXPECT_EQ(tags, expected) << output;
}

TEST_F(PprofToolTest, RenderToPbGzWritesPprofAsRecordAndMergeDo)
{
  // Two folded files, summed, as for a flame graph.
  std::ofstream(path("a.folded")) << "java;main;Foo.bar_[j] 3\njava;main;read_[k] 1\n";
  std::ofstream(path("b.folded")) << "perf-1234;[unknown];find_slot 2\njava;main;Foo.bar_[j] 4\n";
  auto run = run_flamebpf({"render", path("a.folded"), path("b.folded"), "-o", path("r.pb.gz")});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  auto summed =
      run_flamebpf({"render", path("a.folded"), path("b.folded"), "-o", path("r.folded")});
  ASSERT_EQ(summed.exit_code, 0) << summed.output;

  auto expected = folded_counts(read_folded(path("r.folded")));
  auto rows = top({"-top", "-nodecount=50", "-nodefraction=0"}, path("r.pb.gz"));
  EXPECT_EQ(rows, expected);
  EXPECT_EQ(rows["Foo.bar"], (Counts{7, 7}));
  EXPECT_EQ(rows["java"], (Counts{0, 8}));
}

TEST_F(PprofToolTest, RecordedProfileAgreesWithItsFoldedFile)
{
  ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
  TempCgroup target;
  auto busy = copy_burner(dir_.path(), "burner_pprof");
  Child workload({busy, "15"}, target.path());
  wait_until_busy(workload.pid(), "burner_pprof");
  auto run = run_flamebpf({"--cgroup", target.path(), "-d", "2", "-o", path("rec.folded")});
  ASSERT_EQ(run.exit_code, 0) << run.output;

  // Folded files keep no frequency: the pprof file holds sample counts only.
  profile::FoldedInput input;
  auto read = profile::read_folded_file(path("rec.folded"), input);
  ASSERT_TRUE(read.has_value()) << read.error().message;
  ASSERT_EQ(input.bad_lines, 0u);
  write_pprof(input.profile, path("rec.pb.gz"));

  auto folded = read_folded(path("rec.folded"));
  auto expected = folded_counts(folded);
  auto rows = top({"-top", "-nodecount=50", "-nodefraction=0"}, path("rec.pb.gz"));
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows.size(), std::min<size_t>(expected.size(), 50));
  for (const auto& [name, counts] : rows)
    EXPECT_EQ(counts, expected[name]) << name;
  for (const char* function : {"burner_pprof", "main", "run", "a", "b", "c"})
    EXPECT_GT(rows[function].cum, 0u) << function;
  EXPECT_EQ(rows["burner_pprof"].cum, total_count(folded));
}

} // namespace
} // namespace flamebpf::testing
