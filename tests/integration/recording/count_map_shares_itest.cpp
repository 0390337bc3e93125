// The kernel's count map is shared by the targets, each with its part: a target whose processes
// come and go by the dozen a second (a new process is a new entry) fills its part and loses its
// further samples, counted, while another target beside it keeps every sample and the map itself
// never fills. Before the parts, the crowd filled the map within a second of each interval and
// the other target's new processes lost their samples to it.
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <regex>
#include <string>

#include "harness.h"

namespace flamebpf::testing {
namespace {

namespace fs = std::filesystem;

// The count map's entries per buffer: the smallest flamebpf takes, shared by two targets.
constexpr const char* kCountStorage = "64";

// The sum of the "<N> <what>" drop lines of a log whose text contains what.
uint64_t dropped(const std::string& log, const std::string& what)
{
  static const std::regex line(R"((\d+) ([^\n]*))");
  uint64_t total = 0;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator();
       ++it) {
    if ((*it)[2].str().starts_with(what))
      total += std::stoull((*it)[1]);
  }
  return total;
}

// CPU time of everything that ran in a cgroup so far, in seconds (cpu.stat's usage_usec).
double cgroup_cpu_seconds(const std::string& cgroup)
{
  std::ifstream stat(cgroup + "/cpu.stat");
  std::string key;
  uint64_t value = 0;
  while (stat >> key >> value) {
    if (key == "usage_usec")
      return static_cast<double>(value) / 1e6;
  }
  return 0;
}

TEST(CountMapShares, ACrowdOfProcessesCannotCrowdAnotherTargetOut)
{
  TempDir dir;
  std::string crowd_binary = copy_burner(dir.path(), "crowd");
  std::string quiet_binary = copy_burner(dir.path(), "quiet");
  TempCgroup crowd;
  TempCgroup quiet;
  // About forty processes a second in one target, one a second in the other.
  Child crowding({"/bin/sh", "-c", "while :; do " + crowd_binary + " 0.02; done"}, crowd.path());
  Child steady({"/bin/sh", "-c", "while :; do " + quiet_binary + " 1; done"}, quiet.path());

  std::string out = dir.path().string() + "/out";
  fs::create_directories(out);
  std::string log_path = dir.path().string() + "/flamebpf.log";
  Child flamebpf({FLAMEBPF_BINARY, "--cgroup", crowd.relative_path(), "--cgroup",
                  quiet.relative_path(), "--count-storage", kCountStorage, "--interval", "2", "-d",
                  "4", "-o", out + "/shares.folded"},
                 "", log_path);
  wait_until_sampling(flamebpf.pid());
  double quiet_before = cgroup_cpu_seconds(quiet.path());
  ASSERT_EQ(flamebpf.wait(), 0) << read_text(log_path);
  double quiet_cpu = cgroup_cpu_seconds(quiet.path()) - quiet_before;
  std::string log = read_text(log_path);

  // The crowd was held to its part; the map never filled, so no target lost a sample to another.
  EXPECT_GT(dropped(log, "samples lost by targets that had filled their part"), 0u) << log;
  EXPECT_EQ(dropped(log, "samples lost to a full count map"), 0u) << log;
  // The quiet target kept its samples: 99 a CPU second.
  uint64_t quiet_samples = 0;
  for (const auto& entry : fs::directory_iterator(out))
    quiet_samples += count_with_prefix(read_folded(entry.path()), "quiet");
  std::printf("[ FIGURES  ] quiet target: %ju samples in %.2f CPU s\n",
              static_cast<uintmax_t>(quiet_samples), quiet_cpu);
  EXPECT_GT(static_cast<double>(quiet_samples), 0.85 * 99 * quiet_cpu) << log;
}

} // namespace
} // namespace flamebpf::testing
