// Agent mode against the real kernel: periodic dumps aligned to the wall clock, a kill -9 in the
// middle of writing, a full output disk, merging dumps over a time range, SIGHUP and SIGTERM.
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <sys/mount.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

#include "dumps/dump_files.h"
#include "harness.h"

namespace flamebpf::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// xmllint's verdict on a file, "" if well-formed.
std::string xml_problems(const std::string& path)
{
  TempDir dir;
  Child lint({"/usr/bin/xmllint", "--noout", path}, "", dir.path().string() + "/out");
  return lint.wait() == 0 ? "" : read_text(dir.path().string() + "/out");
}

// Whether every line of a folded file is whole: "stack count\n".
bool folded_is_whole(const std::string& path)
{
  std::string text = read_text(path);
  if (!text.empty() && text.back() != '\n')
    return false;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    auto space = line.rfind(' ');
    if (space == std::string::npos ||
        line.find_first_not_of("0123456789", space + 1) != std::string::npos)
      return false;
  }
  return true;
}

// Every file below dir that has a final name is whole: folded files parse, SVGs are XML,
// latest links point at files that exist.
void expect_only_whole_files(const std::string& dir)
{
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    std::string name = entry.path().filename();
    if (name.find(".tmp.") != std::string::npos || entry.is_directory())
      continue;
    if (entry.is_symlink()) {
      EXPECT_TRUE(fs::exists(entry.path())) << entry.path() << " points nowhere";
      continue;
    }
    if (name.ends_with(".folded")) {
      EXPECT_TRUE(folded_is_whole(entry.path())) << entry.path();
    } else if (name.ends_with(".svg")) {
      EXPECT_EQ(xml_problems(entry.path()), "") << entry.path();
    } else if (name.ends_with(".pb.gz")) {
      Child gunzip({"/bin/gzip", "--test", entry.path()});
      EXPECT_EQ(gunzip.wait(), 0) << entry.path() << " is not whole gzip";
    }
  }
}

bool have_setpriv()
{
  return ::access("/usr/bin/setpriv", X_OK) == 0;
}

// Runs a shell script as the real unprivileged user nobody; its exit code.
int as_nobody(const std::string& script)
{
  Child shell({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
               "--inh-caps=-all", "/bin/sh", "-c", script});
  return shell.wait();
}

mode_t mode_of(const std::string& path)
{
  struct stat status {};
  EXPECT_EQ(::lstat(path.c_str(), &status), 0) << path;
  return status.st_mode & 07777;
}

std::set<std::string> names_in(const std::string& dir)
{
  std::set<std::string> names;
  std::error_code ignored;
  for (const auto& entry : fs::directory_iterator(dir, ignored))
    names.insert(entry.path().filename());
  return names;
}

// One target's coverage in a stats line (profile/coverage.h).
struct TargetCoverage {
  double coverage = 0;
  bool judged = false;
  double drops = 0; // the shortfall of drops, in samples
  std::string reason;
};

// The coverage of each target in a stats line, in the order the line has them.
std::vector<TargetCoverage> coverage_in(const std::string& stats_line)
{
  static const std::regex entry(
      R"re("cpu_seconds":[0-9.]+,"expected_samples":[0-9.]+,"samples":\d+,"whole_samples":\d+,)re"
      R"re("coverage":([0-9.]+),"judged":(true|false),"shortfall":\{"drops":([0-9.]+),[^}]*\},)re"
      R"re("reason":"(\w+)")re");
  std::vector<TargetCoverage> found;
  for (std::sregex_iterator it(stats_line.begin(), stats_line.end(), entry), end; it != end; ++it)
    found.push_back({std::stod((*it)[1]), (*it)[2] == "true", std::stod((*it)[3]), (*it)[4]});
  return found;
}

class AgentTest : public ::testing::Test {
protected:
  void SetUp() override
  {
    ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
    out_ = dir_.path().string() + "/dumps";
  }

  // Waits until the wall clock is just past a multiple of two seconds.
  static void align_to_even_second()
  {
    auto now = std::chrono::system_clock::now().time_since_epoch();
    auto next = std::chrono::seconds(
        (std::chrono::duration_cast<std::chrono::seconds>(now).count() / 2 + 1) * 2);
    // Kept: a wait for the wall clock itself.
    std::this_thread::sleep_for(next - now + 50ms);
  }

  TempDir dir_;
  std::string out_;
};

TEST_F(AgentTest, ThreeIntervalsGiveThreeDumpsPerTarget)
{
  TempCgroup web;
  TempCgroup db;
  Child a({copy_burner(dir_.path(), "burner_web"), "30"}, web.path());
  Child b({copy_burner(dir_.path(), "burner_db"), "30"}, db.path());
  align_to_even_second();
  // Starts in the first window and ends in the third, whether it takes 0.1 s or 1.4 s to load
  // (as under a sanitizer): three windows.
  auto run = run_flamebpf({"--cgroup", web.path(), "--cgroup", db.path(), "--output-dir", out_,
                           "--interval", "2", "-d", "4.5"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (const auto& [cgroup, comm] : {std::pair(&web, "burner_web"), std::pair(&db, "burner_db")}) {
    std::string target = out_ + "/" + dumps::target_directory(cgroup->relative_path());
    auto dumps = dumps::list_dumps(target);
    ASSERT_EQ(dumps.size(), 3u) << target << "\n" << run.output;
    // The middle window is one whole interval on the wall clock's multiples of 2 s.
    auto middle = dumps[1].window;
    EXPECT_EQ(middle.end - middle.start, 2s);
    EXPECT_EQ(middle.start.time_since_epoch() % 2s, std::chrono::system_clock::duration::zero());
    EXPECT_EQ(dumps[0].window.end, middle.start);
    EXPECT_EQ(dumps[2].window.start, middle.end);
    for (const auto& dump : dumps) {
      ASSERT_EQ(dump.files.size(), 2u); // folded and svg, the default formats
      auto folded = read_folded(target + "/" + dump.files[0]);
      EXPECT_GT(count_containing(folded, "main;run;a;b;c"), 10u) << dump.files[0];
      EXPECT_EQ(total_count(folded), count_with_prefix(folded, std::string(comm) + ";"));
    }
    EXPECT_EQ(fs::read_symlink(target + "/latest.folded"), dumps[2].files[0]);
  }
  // One stats line per interval.
  std::string stats = read_text(out_ + "/flamebpf-stats.jsonl");
  EXPECT_EQ(std::count(stats.begin(), stats.end(), '\n'), 3) << stats;
  EXPECT_NE(stats.find("\"samples\""), std::string::npos);
  EXPECT_NE(run.output.find("interval "), std::string::npos) << run.output;
  // Busy targets' samples are their CPU time, each stack whole, in the whole interval; the
  // partial ones are printed as figures.
  auto lines = lines_with(stats, "\"coverage\"");
  ASSERT_EQ(lines.size(), 3u) << stats;
  for (size_t i = 0; i < lines.size(); ++i) {
    auto targets = coverage_in(lines[i]);
    ASSERT_EQ(targets.size(), 2u) << lines[i];
    for (const auto& target : targets) {
      std::printf("[ FIGURES  ] interval %zu: coverage %.3f (%s)\n", i, target.coverage,
                  target.reason.c_str());
      if (i != 1)
        continue;
      EXPECT_TRUE(target.judged) << lines[i];
      EXPECT_GE(target.coverage, 0.9) << lines[i] << "\n" << run.output;
      EXPECT_LE(target.coverage, 1.1) << lines[i] << "\n" << run.output;
    }
  }
  EXPECT_NE(run.output.find("; coverage "), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("its profile covers"), std::string::npos) << run.output;
  expect_only_whole_files(out_);
}

TEST_F(AgentTest, MergeSumsTheDumpsOfARange)
{
  TempCgroup web;
  Child a({copy_burner(dir_.path(), "burner_merge"), "30"}, web.path());
  auto run =
      run_flamebpf({"--cgroup", web.path(), "--output-dir", out_, "--interval", "1", "-d", "3.5"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  std::string target = out_ + "/" + dumps::target_directory(web.relative_path());
  auto dumps = dumps::list_dumps(target);
  ASSERT_GE(dumps.size(), 4u);
  std::map<std::string, uint64_t> sum;
  for (const auto& dump : dumps) {
    for (const auto& [stack, count] : read_folded(target + "/" + dump.files[0]))
      sum[stack] += count;
  }
  auto merged = run_flamebpf({"merge", target, "-o", dir_.path().string() + "/all.folded"});
  ASSERT_EQ(merged.exit_code, 0) << merged.output;
  EXPECT_EQ(read_folded(dir_.path().string() + "/all.folded"), sum);

  // A range that holds the second and third windows only.
  auto from = dumps::window_name(dumps[1].window).substr(0, 16);
  auto to = dumps::window_name(dumps[2].window).substr(17, 16);
  std::map<std::string, uint64_t> middle;
  for (size_t i = 1; i <= 2; ++i) {
    for (const auto& [stack, count] : read_folded(target + "/" + dumps[i].files[0]))
      middle[stack] += count;
  }
  auto ranged = run_flamebpf(
      {"merge", target, "--from", from, "--to", to, "-o", dir_.path().string() + "/range.folded"});
  ASSERT_EQ(ranged.exit_code, 0) << ranged.output;
  EXPECT_EQ(read_folded(dir_.path().string() + "/range.folded"), middle) << from << " " << to;
  auto svg = run_flamebpf(
      {"merge", target, "--from", from, "--to", to, "-o", dir_.path().string() + "/range.svg"});
  ASSERT_EQ(svg.exit_code, 0) << svg.output;
  EXPECT_EQ(xml_problems(dir_.path().string() + "/range.svg"), "");
  auto empty = run_flamebpf(
      {"merge", target, "--from", "@0", "--to", "@1", "-o", dir_.path().string() + "/none.folded"});
  EXPECT_EQ(empty.exit_code, 2) << empty.output;
}

TEST_F(AgentTest, KillNineMidWriteLeavesOnlyWholeFiles)
{
  TempCgroup web;
  Child a({copy_burner(dir_.path(), "burner_kill"), "60"}, web.path());
  std::mt19937 random(std::random_device{}());
  for (int round = 0; round < 6; ++round) {
    // Short intervals: a write is in progress much of the time.
    Child agent({FLAMEBPF_BINARY, "--cgroup", web.path(), "--output-dir", out_, "--interval", "0.1",
                 "--format", "folded,svg"},
                "", dir_.path().string() + "/log");
    // Kept: killed at a random moment, most likely mid-write.
    std::this_thread::sleep_for(std::chrono::milliseconds(700 + random() % 600));
    agent.signal(SIGKILL);
    agent.wait();
    expect_only_whole_files(out_);
  }
  std::string target = out_ + "/" + dumps::target_directory(web.relative_path());
  EXPECT_GT(dumps::list_dumps(target).size(), 10u);
  // The next run removes what the killed ones left half-written.
  auto run =
      run_flamebpf({"--cgroup", web.path(), "--output-dir", out_, "--interval", "1", "-d", "0.5"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (const auto& entry : fs::recursive_directory_iterator(out_))
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos) << entry.path();
}

TEST_F(AgentTest, SighupAndSigtermAtRandomPointsOfTheDumpCycle)
{
  TempCgroup web;
  Child a({copy_burner(dir_.path(), "burner_hup"), "60"}, web.path());
  std::mt19937 random(std::random_device{}());
  for (int round = 0; round < 4; ++round) {
    std::string log = dir_.path().string() + "/log" + std::to_string(round);
    Child agent({FLAMEBPF_BINARY, "--cgroup", web.path(), "--output-dir", out_, "--interval", "0.1",
                 "--format", "folded,svg,pprof"},
                "", log);
    ASSERT_TRUE(wait_for_text(log, "interval ", 10)) << read_text(log);
    // Kept: signals at random moments of the intervals.
    for (int hup = 0; hup < 5; ++hup) {
      std::this_thread::sleep_for(std::chrono::milliseconds(random() % 250));
      agent.signal(SIGHUP);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(random() % 250));
    agent.signal(SIGTERM);
    EXPECT_EQ(agent.wait(), 0) << read_text(log);
    EXPECT_EQ(read_text(log).find("error"), std::string::npos) << read_text(log);
    expect_only_whole_files(out_);
  }
  // Every interval of every run was written; SIGTERM left no temporary file.
  for (const auto& entry : fs::recursive_directory_iterator(out_))
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos) << entry.path();
}

TEST_F(AgentTest, ForkStormFillsTheMapsAndEveryDropIsCounted)
{
  TempCgroup storm;
  // Thousands of short processes a second, each a new key of the count map; small maps.
  Child forks({"/bin/sh", "-c", "while :; do /bin/true; /bin/true; /bin/true; /bin/true; done"},
              storm.path());
  Child forks_too({"/bin/sh", "-c", "while :; do /bin/true; /bin/true; /bin/true; done"},
                  storm.path());
  std::string log = dir_.path().string() + "/log";
  Child agent({FLAMEBPF_BINARY, "--cgroup", storm.path(), "--output-dir", out_, "--interval", "0.5",
               "--count-storage", "64", "--stack-storage", "64", "--format", "folded"},
              "", log);
  // Kept: the storm lasts 3 s and the quiet after it 2 s, at least eight intervals of 0.5 s.
  std::this_thread::sleep_for(3s);
  forks.signal(SIGKILL);
  forks_too.signal(SIGKILL);
  forks.wait();
  forks_too.wait();
  // After the storm: intervals with nothing left to drop.
  std::this_thread::sleep_for(2s);
  agent.signal(SIGTERM);
  ASSERT_EQ(agent.wait(), 0) << read_text(log);
  std::istringstream stats(read_text(out_ + "/flamebpf-stats.jsonl"));
  uint64_t drops_in_storm = 0;
  std::vector<std::string> lines;
  for (std::string line; std::getline(stats, line);)
    lines.push_back(line);
  ASSERT_GE(lines.size(), 8u) << read_text(log);
  auto total_drops = [](const std::string& line) {
    const std::string key = "\"drops\":{\"total\":";
    auto at = line.find(key);
    return at == std::string::npos ? UINT64_MAX : std::stoull(line.substr(at + key.size()));
  };
  for (size_t i = 0; i + 3 < lines.size(); ++i)
    drops_in_storm += total_drops(lines[i]);
  EXPECT_GT(drops_in_storm, 0u) << "the storm never filled a map:\n" << read_text(log);
  // Every drop is said in the log too.
  EXPECT_NE(read_text(log).find("raise --"), std::string::npos) << read_text(log);
  // The last whole interval, after the storm, lost nothing.
  EXPECT_EQ(total_drops(lines[lines.size() - 2]), 0u) << lines[lines.size() - 2];
  // What the maps lost is part of the storm's shortfall; the largest part (its processes come and
  // go before their files are read, and /bin/true has no symbols: naming, as often as drops) is
  // said once.
  std::string first_reason;
  double dropped = 0;
  for (size_t i = 0; i + 3 < lines.size(); ++i) {
    for (const auto& target : coverage_in(lines[i])) {
      dropped += target.drops;
      if (!target.judged)
        continue;
      EXPECT_LT(target.coverage, 0.9) << lines[i];
      if (first_reason.empty())
        first_reason = target.reason;
    }
  }
  std::printf("[ FIGURES  ] %.0f samples short for drops; the first reason %s\n", dropped,
              first_reason.c_str());
  EXPECT_GE(dropped, static_cast<double>(drops_in_storm) / 2)
      << read_text(out_ + "/flamebpf-stats.jsonl");
  auto warnings = lines_with(read_text(log), "its profile covers");
  ASSERT_EQ(warnings.size(), 1u) << read_text(log);
  EXPECT_NE(warnings[0].find("is " + first_reason + ": "), std::string::npos) << warnings[0];
  expect_only_whole_files(out_);
}

TEST_F(AgentTest, FullDiskIsLoggedSurvivedAndRecovered)
{
  TempCgroup web;
  Child a({copy_burner(dir_.path(), "burner_full"), "60"}, web.path());
  fs::create_directories(out_);
  // mode=0750: a tmpfs's root is world-writable (1777) by default, and flamebpf refuses to keep
  // profiles in a directory others may write.
  ASSERT_EQ(::mount("flamebpf-test", out_.c_str(), "tmpfs", 0, "size=512k,mode=0750"), 0);
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{out_};
  std::string log = dir_.path().string() + "/log";
  Child agent({FLAMEBPF_BINARY, "--cgroup", web.path(), "--output-dir", out_, "--interval", "1",
               "--format", "folded,svg"},
              "", log);
  ASSERT_TRUE(wait_for_text(log, "interval ", 10)) << read_text(log);
  // Fill the disk to the last byte.
  {
    std::ofstream filler(out_ + "/filler", std::ios::binary);
    std::string block(4096, 'x');
    while (filler.write(block.data(), block.size()))
      ;
  }
  ASSERT_TRUE(wait_for_text(log, "No space left on device", 10)) << read_text(log);
  // Kept: intervals pass on the full disk, then after it, six of 1 s in all.
  std::this_thread::sleep_for(2500ms);
  std::string during = read_text(log);
  EXPECT_EQ(during.find("dropping the dumps"), std::string::npos) << during;
  // Space returns: the kept intervals are written, and the agent goes on.
  fs::remove(out_ + "/filler");
  std::this_thread::sleep_for(2500ms);
  agent.signal(SIGTERM);
  EXPECT_EQ(agent.wait(), 0) << read_text(log);
  std::string target = out_ + "/" + dumps::target_directory(web.relative_path());
  auto dumps = dumps::list_dumps(target);
  // Every interval is there, those of the full disk too: the windows follow each other.
  ASSERT_GE(dumps.size(), 6u) << read_text(log);
  for (size_t i = 1; i < dumps.size(); ++i)
    EXPECT_EQ(dumps[i].window.start, dumps[i - 1].window.end) << i;
  expect_only_whole_files(out_);
  // Said once per interval, not once per file.
  std::string text = read_text(log);
  size_t lines = 0;
  for (size_t at = text.find("No space left"); at != std::string::npos;
       at = text.find("No space left", at + 1))
    ++lines;
  EXPECT_LE(lines, 8u) << text;
}

TEST_F(AgentTest, SigtermWritesThePartialLastInterval)
{
  TempCgroup web;
  Child a({copy_burner(dir_.path(), "burner_term"), "30"}, web.path());
  std::string log = dir_.path().string() + "/log";
  Child agent({FLAMEBPF_BINARY, "--cgroup", web.path(), "--output-dir", out_, "--interval", "60"},
              "", log);
  // Kept: the run lasts about 2 s, which its dumps must cover.
  std::this_thread::sleep_for(1500ms);
  agent.signal(SIGHUP); // resolves the targets again; nothing changes
  std::this_thread::sleep_for(500ms);
  agent.signal(SIGTERM);
  ASSERT_EQ(agent.wait(), 0) << read_text(log);
  EXPECT_NE(read_text(log).find("SIGHUP"), std::string::npos);
  std::string target = out_ + "/" + dumps::target_directory(web.relative_path());
  // One dump, or two when the run straddled a minute boundary; together about 2 s.
  auto dumps = dumps::list_dumps(target);
  ASSERT_GE(dumps.size(), 1u) << read_text(log);
  ASSERT_LE(dumps.size(), 2u) << read_text(log);
  auto covered = dumps.back().window.end - dumps.front().window.start;
  EXPECT_GT(covered, 1500ms);
  EXPECT_LT(covered, 10s);
  std::map<std::string, uint64_t> folded;
  for (const auto& dump : dumps) {
    for (const auto& [stack, count] : read_folded(target + "/" + dump.files[0]))
      folded[stack] += count;
  }
  EXPECT_GT(count_with_prefix(folded, "burner_term;"), 100u);
  EXPECT_GT(count_containing(folded, "main;run;a;b;c"), 100u);
}

TEST_F(AgentTest, AnOutputDirectoryOthersControlIsRefusedInOneLine)
{
  if (!have_setpriv())
    GTEST_SKIP() << "setpriv (util-linux) is not installed";
  // Made by another user first, in a directory everyone may write, as /tmp is.
  std::string shared = dir_.path().string() + "/shared";
  fs::create_directory(shared);
  ::chmod(dir_.path().c_str(), 0755);
  ::chmod(shared.c_str(), 01777);
  std::string theirs = shared + "/flamebpf";
  ASSERT_EQ(as_nobody("mkdir -m 0755 " + theirs), 0);
  std::string open = dir_.path().string() + "/open";
  fs::create_directory(open);
  ::chmod(open.c_str(), 0777);
  std::string real = dir_.path().string() + "/real";
  fs::create_directory(real);
  std::string link = dir_.path().string() + "/link";
  fs::create_directory_symlink(real, link);
  for (const auto& [directory, why] : {std::pair(theirs, " belongs to uid 65534, not to root"),
                                       std::pair(open, " is writable by others (mode 0777)"),
                                       std::pair(link, " is a symbolic link")}) {
    auto run = run_flamebpf({"--output-dir", directory, "--interval", "1", "-d", "1"});
    EXPECT_EQ(run.exit_code, 1) << run.output;
    EXPECT_EQ(std::count(run.output.begin(), run.output.end(), '\n'), 1) << run.output;
    EXPECT_NE(run.output.find("--output-dir " + directory + why), std::string::npos) << run.output;
    EXPECT_TRUE(names_in(directory).empty()) << directory;
  }
}

TEST_F(AgentTest, FilesAreReadableByTheGroupAndDirectoriesCreated0750)
{
  TempCgroup web;
  Child a({copy_burner(dir_.path(), "burner_modes"), "30"}, web.path());
  std::string out = dir_.path().string() + "/new/dumps";
  auto run = run_flamebpf({"--cgroup", web.path(), "--output-dir", out, "--interval", "1", "-d",
                           "1.5", "--format", "folded,svg,pprof"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(mode_of(out), 0750u);
  EXPECT_EQ(mode_of(out + "/flamebpf-stats.jsonl"), 0640u);
  std::string target = out + "/" + dumps::target_directory(web.relative_path());
  EXPECT_EQ(mode_of(target), 0750u);
  auto dumps = dumps::list_dumps(target);
  ASSERT_GE(dumps.size(), 1u) << run.output;
  for (const auto& dump : dumps) {
    for (const auto& file : dump.files)
      EXPECT_EQ(mode_of(target + "/" + file), 0640u) << file;
  }
}

TEST_F(AgentTest, ATargetDirectoryTurnedIntoALinkIsRefusedAndTheOthersKeepBeingWritten)
{
  TempCgroup web;
  TempCgroup db;
  Child a({copy_burner(dir_.path(), "burner_web"), "60"}, web.path());
  Child b({copy_burner(dir_.path(), "burner_db"), "60"}, db.path());
  // Another directory, with a file retention would remove if it were in a target's directory.
  TempDir elsewhere;
  const std::string old_dump = "20200101T000000Z_20200101T000100Z.folded";
  std::ofstream(elsewhere.path().string() + "/" + old_dump) << "precious 1\n";
  auto before = names_in(elsewhere.path());
  std::string log = dir_.path().string() + "/log";
  Child agent({FLAMEBPF_BINARY, "--cgroup", web.path(), "--cgroup", db.path(), "--output-dir", out_,
               "--interval", "1", "--format", "folded", "--retain-count", "2"},
              "", log);
  std::string web_dir = out_ + "/" + dumps::target_directory(web.relative_path());
  std::string db_dir = out_ + "/" + dumps::target_directory(db.relative_path());
  // The first dumps of both (the first window may be too short to hold samples).
  ASSERT_TRUE(wait_until(
      [&] {
        return fs::exists(web_dir + "/latest.folded") && fs::exists(db_dir + "/latest.folded");
      },
      10s, "the first dumps of both targets"))
      << read_text(log);
  // Between two intervals, web's directory becomes a link to the other directory.
  fs::rename(web_dir, dir_.path().string() + "/web.moved");
  fs::create_directory_symlink(elsewhere.path(), web_dir);
  auto db_before = dumps::list_dumps(db_dir).back().window;
  // Kept: intervals pass for 4 s with the link in place.
  std::this_thread::sleep_for(4s);
  ASSERT_EQ(::kill(agent.pid(), 0), 0) << "flamebpf exited:\n" << read_text(log);
  agent.signal(SIGTERM);
  ASSERT_EQ(agent.wait(), 0) << read_text(log);

  // Nothing was written to or removed from the other directory.
  EXPECT_EQ(names_in(elsewhere.path()), before);
  EXPECT_EQ(read_text(elsewhere.path().string() + "/" + old_dump), "precious 1\n");
  EXPECT_TRUE(fs::is_symlink(web_dir));
  // Said once, naming the directory, and db was written all along.
  auto said = lines_with(read_text(log), web_dir + " is a symbolic link");
  EXPECT_EQ(said.size(), 1u) << read_text(log);
  auto db_dumps = dumps::list_dumps(db_dir);
  ASSERT_EQ(db_dumps.size(), 2u) << read_text(log); // --retain-count 2
  EXPECT_GT(db_dumps.back().window.end, db_before.end + 2s) << read_text(log);
  // The last whole interval (the newest dump is SIGTERM's partial one).
  auto whole = read_folded(db_dir + "/" + db_dumps.front().files[0]);
  EXPECT_GT(count_with_prefix(whole, "burner_db;"), 10u) << read_text(log);
}

TEST_F(AgentTest, AFifoAtTheStatsFileNeverBlocksTheAgent)
{
  TempCgroup web;
  Child a({copy_burner(dir_.path(), "burner_stats"), "30"}, web.path());
  ASSERT_EQ(::mkdir(out_.c_str(), 0750), 0);
  std::string stats = out_ + "/flamebpf-stats.jsonl";
  ASSERT_EQ(::mkfifo(stats.c_str(), 0600), 0);
  std::string log = dir_.path().string() + "/log";
  Child agent({FLAMEBPF_BINARY, "--cgroup", web.path(), "--output-dir", out_, "--interval", "1",
               "--format", "folded"},
              "", log);
  // Intervals go on: their dumps are written whatever the stats file is.
  std::string target = out_ + "/" + dumps::target_directory(web.relative_path());
  wait_until([&] { return dumps::list_dumps(target).size() >= 3; }, 20s,
             "three dumps beside the FIFO");
  agent.signal(SIGTERM);
  // Blocked in the FIFO's open, it would never see SIGTERM's flag.
  poll_until(
      [&] {
        return read_text("/proc/" + std::to_string(agent.pid()) + "/stat").find(") Z") !=
               std::string::npos;
      },
      20s, 50ms);
  agent.signal(SIGKILL);
  EXPECT_EQ(agent.wait(), 0) << "flamebpf blocked on the FIFO\n" << read_text(log);
  EXPECT_GE(dumps::list_dumps(target).size(), 3u) << read_text(log);
  // Said once, however many intervals passed.
  EXPECT_EQ(lines_with(read_text(log), stats + ": it is a FIFO").size(), 1u) << read_text(log);
  struct stat status {};
  ASSERT_EQ(::lstat(stats.c_str(), &status), 0);
  EXPECT_TRUE(S_ISFIFO(status.st_mode));
}

TEST_F(AgentTest, TargetsWhoseNamesMeetAfterSanitizingGetADirectoryEach)
{
  // "<parent>/a" would be written to "<parent>_a", the directory of the cgroup "<parent>_a".
  CgroupsMeetingAsFileNames cgroups;
  const std::string& nested = cgroups.nested();
  const std::string& sibling = cgroups.sibling();
  {
    Child in_nested({copy_burner(dir_.path(), "burner_nested"), "15"}, nested);
    Child in_sibling({copy_burner(dir_.path(), "burner_sibling"), "15"}, sibling);
    auto run = run_flamebpf({"--cgroup", nested, "--cgroup", sibling, "--output-dir", out_,
                             "--interval", "1", "-d", "2.5", "--format", "folded"});
    ASSERT_EQ(run.exit_code, 0) << run.output;
    auto directories = names_in(out_);
    directories.erase("flamebpf-stats.jsonl");
    ASSERT_EQ(directories.size(), 2u) << ::testing::PrintToString(directories) << run.output;
    std::string mount = cgroup2_mount();
    for (const auto& [cgroup, comm, other] :
         {std::tuple(nested, "burner_nested;", "burner_sibling;"),
          std::tuple(sibling, "burner_sibling;", "burner_nested;")}) {
      std::string target = out_ + "/" + dumps::target_directory(cgroup.substr(mount.size() + 1));
      std::map<std::string, uint64_t> folded;
      for (const auto& dump : dumps::list_dumps(target)) {
        for (const auto& [stack, count] : read_folded(target + "/" + dump.files[0]))
          folded[stack] += count;
      }
      EXPECT_GT(count_with_prefix(folded, comm), 50u) << target << "\n" << run.output;
      EXPECT_EQ(count_with_prefix(folded, other), 0u) << target;
    }
  }
}

} // namespace
} // namespace flamebpf::testing
