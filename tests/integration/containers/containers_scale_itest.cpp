// A node's worth of containers, scaled down to a CI run: one agent over 30 idle containers, 3 busy
// native ones and 4 JVMs of two images. What the agent says it holds (the memory breakdown) must
// explain its anonymous memory, every JVM's Java frames must be named, and the copies of one
// image's files must share one symbol table. bench/scale.sh measures the same at full scale.
#include <cstdio>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "container_harness.h"
#include "dumps/dump_files.h"
#include "harness.h"

namespace flamebpf::testing {
namespace {

constexpr int kIdle = 30;
constexpr int kBusy = 3;
constexpr int kJvms = 4;

class ScaleTest : public ::testing::Test {
protected:
  void SetUp() override { ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root"; }

  DockerDaemon& docker_ = DockerDaemon::shared();
  ContainersRemovedAtEnd containers_removed_{docker_};
  TempDir dir_;
};

TEST_F(ScaleTest, TheMemoryBreakdownExplainsTheAgentsMemoryAndEveryJvmIsNamed)
{
  std::string burner = docker_.burner_image();
  std::string java = docker_.java_image(JavaVersion::kJdk17);
  for (int i = 0; i < kIdle; ++i)
    docker_.run("scale-idle-" + std::to_string(i), {}, burner, {"/bin/sleep", "300"});
  // A fifth of a CPU each, so that the machine keeps room for the agent and the JVMs' start.
  for (int i = 0; i < kBusy; ++i)
    docker_.run("scale-busy-" + std::to_string(i), {"--cpus", "0.2"}, burner,
                {"/usr/bin/burner_a", "300"});
  for (int i = 0; i < kJvms; ++i)
    docker_.run("scale-jvm-" + std::to_string(i), {"--cpus", "0.25"}, java,
                {std::string(kContainerJavaHome) + "/bin/java", "-XX:+PreserveFramePointer", "-cp",
                 std::string(kContainerAppDir), "Burner", "300"});
  for (int i = 0; i < kJvms; ++i)
    docker_.wait_for_output("scale-jvm-" + std::to_string(i), "burner ready",
                            std::chrono::seconds(120));

  std::string out = dir_.path().string() + "/dumps";
  auto run = run_flamebpf({"--all-containers", "--containers-only", "--output-dir", out,
                           "--interval", "10", "-F", "99", "-d", "35", "-v"});
  ASSERT_EQ(run.exit_code, 0) << run.output;

  // The last interval's stats: the agent has read every container's files by then.
  std::istringstream stats(read_text(out + "/flamebpf-stats.jsonl"));
  std::vector<nlohmann::json> intervals;
  for (std::string line; std::getline(stats, line);)
    intervals.push_back(nlohmann::json::parse(line));
  ASSERT_GE(intervals.size(), 3u) << run.output;
  const auto& last = intervals.back();
  const auto& own = last.at("flamebpf");
  const auto& memory = own.at("memory_bytes");
  double anonymous = own.at("rss_anon_bytes").get<double>();
  double accounted = memory.at("total").get<double>();
  double other = memory.at("other").get<double>();
  double heap_free = memory.at("heap_free").get<double>();
  // The breakdown is the heap; the anonymous memory is the heap, the threads' stacks and little
  // else. What is allocated was written, so it is resident; the free heap need not be, since
  // malloc_trim hands its pages back without shrinking it.
  double allocated = accounted - heap_free;
  // Once an interval's free pages go back to the kernel, what is not heap (the threads' stacks,
  // the libraries' own data: under 1 MiB) is a tenth of so small an agent.
  constexpr double kNotHeapBytes = 1 << 20;
  EXPECT_GE(accounted, anonymous * 0.9 - kNotHeapBytes) << last.dump();
  EXPECT_LE(allocated, anonymous * 1.05) << last.dump();
  // The kinds, not the rest, hold most of what is allocated.
  double kinds = allocated - other;
  EXPECT_GT(kinds, other) << last.dump();

  // Copies of one image's files (each idle container maps its sleep, libc and loader) share a
  // table.
  const auto& occupancy = last.at("occupancy");
  size_t files = occupancy.at("elf_files");
  size_t tables = occupancy.at("symbol_tables");
  EXPECT_GE(files, static_cast<size_t>(kIdle)) << last.dump();
  EXPECT_LE(tables * 4, files) << last.dump();
  // And their unwind tables: each JVM after the first maps a copy of the image's libjvm (and of
  // every other library), known for one by what the first build read, not built.
  static const std::regex copies_pattern(R"(\((\d+) found copies unread\))");
  uint64_t unwind_copies = 0;
  for (auto it = std::sregex_iterator(run.output.begin(), run.output.end(), copies_pattern);
       it != std::sregex_iterator(); ++it)
    unwind_copies = std::stoull((*it)[1]);
  EXPECT_GE(unwind_copies, static_cast<uint64_t>(kJvms - 1)) << run.output.substr(0, 20000);

  // Every JVM's Java frames are named: over the run, and in each JVM's own dumps.
  uint64_t jit_frames = 0;
  uint64_t jit_unnamed = 0;
  for (const auto& interval : intervals) {
    jit_frames += interval.at("unnamed_frames").at("jit").get<uint64_t>();
    jit_unnamed += interval.at("unnamed_frames").at("jit_unnamed").get<uint64_t>();
  }
  EXPECT_GT(jit_frames, 0u) << run.output;
  EXPECT_LE(jit_unnamed * 100, jit_frames * 2) << run.output;
  for (int i = 0; i < kJvms; ++i) {
    std::string target = out + "/scale-jvm-" + std::to_string(i);
    uint64_t java_samples = 0;
    uint64_t named_leaf = 0;
    for (const auto& dump : dumps::list_dumps(target)) {
      for (const auto& [stack, count] : read_folded(target + "/" + dump.files[0])) {
        if (!stack.starts_with("java;"))
          continue;
        java_samples += count;
        std::string leaf = stack.substr(stack.rfind(';') + 1);
        named_leaf += leaf.ends_with("_[j]") || leaf.ends_with("_[i]") ? count : 0;
      }
    }
    EXPECT_GT(java_samples, 30u) << target;
    EXPECT_GE(named_leaf * 100, java_samples * 90) << target;
  }
  std::printf("[ FIGURES  ] %d containers: anonymous %.1f MiB, breakdown %.1f MiB (%.0f%%): "
              "kinds %.1f, other %.1f, heap_free %.1f; %zu ELF files in %zu tables; %llu unwind "
              "tables' files found copies unread; %llu of %llu JIT frames unnamed\n",
              kIdle + kBusy + kJvms, anonymous / (1 << 20), accounted / (1 << 20),
              100 * accounted / anonymous, kinds / (1 << 20), other / (1 << 20),
              heap_free / (1 << 20), files, tables, static_cast<unsigned long long>(unwind_copies),
              static_cast<unsigned long long>(jit_unnamed),
              static_cast<unsigned long long>(jit_frames));
}

} // namespace
} // namespace flamebpf::testing
