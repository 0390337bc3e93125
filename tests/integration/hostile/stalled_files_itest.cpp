// A target's file on a FUSE file system whose daemon stops answering (tests/progs/stall_fs): a
// hostile container's, or a hung network file system's. flamebpf must finish on time, say once
// what stalled, and profile everything else as usual.
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <elf.h>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <iterator>
#include <string>
#include <sys/mount.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "harness.h"

#ifndef STALL_FS_BINARY
#error "define STALL_FS_BINARY and MAPS_FILE_BINARY (tests/CMakeLists.txt)"
#endif

namespace flamebpf::testing {
namespace {

using Clock = std::chrono::steady_clock;

// flamebpf waits this long for a stalled read (StallGuard's limit in the symbolizer), and a run
// may take this much beyond its -d besides.
constexpr double kStallLimitSeconds = 1.0;
constexpr double kSlackSeconds = 4.0;

struct BoundedRun {
  bool hung = false;  // killed at the limit
  double seconds = 0; // until flamebpf's main thread returned
  std::string log;
};

class StalledFileTest : public ::testing::Test {
protected:
  void SetUp() override
  {
    ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
    // Outside /tmp, which the perf-map test's process replaces with a /tmp of its own.
    char pattern[] = "/var/tmp/flamebpf-stall.XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    mount_point_ = pattern;
    std::vector<std::string> argv{STALL_FS_BINARY, mount_point_};
    auto served = served_file();
    argv.insert(argv.end(), served.begin(), served.end());
    daemon_ = std::make_unique<Child>(argv, "", dir_.path().string() + "/stall_fs.log");
    ASSERT_TRUE(wait_for_text(dir_.path().string() + "/stall_fs.log", "stall_fs ready", 10))
        << read_text(dir_.path().string() + "/stall_fs.log");
  }

  void TearDown() override { release(); }

  // Ends the file system's daemon, which fails every request still waiting on it, unmounts it,
  // and reaps flamebpf; returns flamebpf's exit code (-1 if none ran).
  int release()
  {
    daemon_.reset();
    ::umount2(mount_point_.c_str(), MNT_DETACH);
    ::rmdir(mount_point_.c_str());
    int code = profiler_ ? profiler_->wait() : -1;
    profiler_.reset();
    return code;
  }

  // Runs flamebpf with args until its main thread returns, killing it after limit_seconds. A
  // thread of it waiting on the stalled file system cannot end, not even by SIGKILL, before the
  // daemon answers or dies: the kernel waits out a FUSE request its daemon has taken. The process
  // is reaped in release().
  BoundedRun run_flamebpf_until_done(const std::vector<std::string>& args, double limit_seconds)
  {
    std::vector<std::string> argv{FLAMEBPF_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    auto started = Clock::now();
    // LeakSanitizer stops every thread of a sanitized flamebpf at its exit, which a thread waiting
    // on the daemon never allows: it would hang there, however well flamebpf ran.
    const char* sanitizer = std::getenv("ASAN_OPTIONS");
    std::string saved = sanitizer ? sanitizer : "";
    ::setenv("ASAN_OPTIONS", (saved + (saved.empty() ? "" : ":") + "detect_leaks=0").c_str(), 1);
    profiler_ = std::make_unique<Child>(argv, "", dir_.path().string() + "/flamebpf.log");
    if (sanitizer)
      ::setenv("ASAN_OPTIONS", saved.c_str(), 1);
    else
      ::unsetenv("ASAN_OPTIONS");
    std::string stat = "/proc/" + std::to_string(profiler_->pid()) + "/stat";
    BoundedRun run;
    // The main thread's return makes the thread group's leader a zombie at once.
    auto limit = started + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(limit_seconds));
    if (!poll_until([&] { return read_text(stat).find(") Z") != std::string::npos; },
                    limit - Clock::now())) {
      profiler_->signal(SIGKILL);
      run.hung = true;
    }
    run.seconds = std::chrono::duration<double>(Clock::now() - started).count();
    run.log = read_text(dir_.path().string() + "/flamebpf.log");
    return run;
  }

  // What stall_fs serves as stalled.so besides its zeros (its FILE OFFSET SIZE), if anything.
  virtual std::vector<std::string> served_file() const { return {}; }

  // From now on the file system answers nothing.
  void stall() { daemon_->signal(SIGUSR1); }

  // The run ended by itself, on time (plus extra seconds), with exit code 0.
  void expect_on_time(const BoundedRun& run, double duration, double extra = 0)
  {
    EXPECT_FALSE(run.hung) << "flamebpf hung; log:\n" << run.log;
    EXPECT_LT(run.seconds, duration + kStallLimitSeconds + kSlackSeconds + extra) << run.log;
    std::printf("[ FIGURES  ] -d %.0f run with a stalled file: %.2f s\n", duration, run.seconds);
    EXPECT_EQ(release(), 0) << run.log;
  }

  TempDir dir_;
  std::string mount_point_;
  std::unique_ptr<Child> daemon_;
  std::unique_ptr<Child> profiler_;
};

TEST_F(StalledFileTest, MappedCodeOnAStalledFileSystemCostsOneLine)
{
  std::string log = dir_.path().string() + "/maps_file.log";
  Child mapper({MAPS_FILE_BINARY, mount_point_ + "/stalled.so", "30"}, "", log);
  ASSERT_TRUE(wait_for_text(log, "maps_file ready", 10)) << read_text(log);
  stall();
  std::string out = dir_.path().string() + "/out.folded";
  auto run =
      run_flamebpf_until_done({"--pid", std::to_string(mapper.pid()), "-d", "3", "-o", out}, 60);
  expect_on_time(run, 3);
  auto lines = std::count(run.log.begin(), run.log.end(), '\n');
  EXPECT_NE(run.log.find("stalled.so"), std::string::npos) << run.log;
  EXPECT_LE(lines, 4) << run.log;
  // The program's own code is named as ever.
  EXPECT_GT(count_containing(read_folded(out), "burn"), 50u) << run.log;
}

TEST_F(StalledFileTest, PerfMapOnAStalledFileSystemCostsOneLine)
{
  // The JIT's perf map, in a /tmp of its own, links into the file system. The spinner is run
  // from its directory, entered before /tmp is covered: the build tree may be below /tmp.
  std::string log = dir_.path().string() + "/spinner.log";
  std::filesystem::path spinner_binary(JIT_SPINNER_BINARY);
  Child spinner({"/usr/bin/unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
                 "cd " + spinner_binary.parent_path().string() +
                     " && mount -t tmpfs tmpfs /tmp && exec ./" +
                     spinner_binary.filename().string() +
                     " --link /tmp/perf-%p.map=" + mount_point_ + "/stalled.map none"},
                "", log);
  ASSERT_TRUE(wait_for_text(log, "spinner ready", 10)) << read_text(log);
  stall();
  std::string out = dir_.path().string() + "/out.folded";
  auto run =
      run_flamebpf_until_done({"--pid", std::to_string(spinner.pid()), "-d", "3", "-o", out}, 60);
  expect_on_time(run, 3);
  EXPECT_NE(run.log.find("perf-"), std::string::npos) << run.log;
  auto folded = read_folded(out);
  EXPECT_GT(total_count(folded), 50u) << run.log;
}

TEST_F(StalledFileTest, JvmWhoseTmpStallsCostsOneLineNotTheRun)
{
  // A process taken for a JVM (it maps a libjvm.so and handles SIGQUIT) whose /tmp, where its
  // perf map is and the agent would go, is the file system; it runs in a directory of its own.
  char work[] = "/var/tmp/flamebpf-jvm.XXXXXX";
  ASSERT_NE(::mkdtemp(work), nullptr);
  // A copy beside it: the build tree may be below /tmp, which the file system covers.
  std::string spinner_copy = std::string(work) + "/jit_spinner";
  std::filesystem::copy_file(JIT_SPINNER_BINARY, spinner_copy);
  std::string log = dir_.path().string() + "/jvm.log";
  auto jvm = std::make_unique<Child>(
      std::vector<std::string>{
          "/usr/bin/unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
          "mount --bind " + mount_point_ + " /tmp && cd " + work + " && exec " + spinner_copy +
              " --jvm -XX:+PreserveFramePointer none"},
      "", log);
  ASSERT_TRUE(wait_for_text(log, "spinner ready", 10)) << read_text(log);
  stall();
  std::string out = dir_.path().string() + "/out.folded";
  auto run =
      run_flamebpf_until_done({"--pid", std::to_string(jvm->pid()), "-d", "3", "-o", out}, 60);
  // The attach waits its timeout (5 s) for the JVM, then a second for the stuck attacher.
  expect_on_time(run, 3, 6);
  EXPECT_NE(run.log.find("attaching to a JVM is stuck"), std::string::npos) << run.log;
  EXPECT_GT(total_count(read_folded(out)), 50u) << run.log;
  jvm.reset();
  std::filesystem::remove_all(work);
}

// The file offset and size of the string table of path's .symtab (a test program's: trusted).
std::pair<uint64_t, uint64_t> symbol_names_of(const std::string& path)
{
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Elf64_Ehdr header{};
  std::memcpy(&header, bytes.data(), sizeof header);
  auto section = [&](size_t index) {
    Elf64_Shdr out{};
    std::memcpy(&out, bytes.data() + header.e_shoff + index * header.e_shentsize, sizeof out);
    return out;
  };
  for (size_t i = 0; i < header.e_shnum; ++i) {
    if (section(i).sh_type == SHT_SYMTAB) {
      Elf64_Shdr names = section(section(i).sh_link);
      return {names.sh_offset, names.sh_size};
    }
  }
  return {0, 0};
}

// A program run from the file system, named from its .symtab: flamebpf reads the table when it
// first names the program's frames, and each name then when a frame needs it, from the file. A
// file system that answers the table's read and then stalls on a name's costs one line and the
// file's names, not the run.
class StalledNameTest : public StalledFileTest {
protected:
  std::vector<std::string> served_file() const override
  {
    auto [offset, size] = symbol_names_of(ELF_SPINNER_BINARY);
    return {ELF_SPINNER_BINARY, std::to_string(offset), std::to_string(size)};
  }
};

TEST_F(StalledNameTest, NameReadOnAStalledFileSystemCostsOneLine)
{
  ASSERT_GT(symbol_names_of(ELF_SPINNER_BINARY).second, 0u);
  std::string log = dir_.path().string() + "/spinner.log";
  Child spinner({mount_point_ + "/stalled.so"}, "", log);
  ASSERT_TRUE(wait_for_text(log, "spinner ready", 10)) << read_text(log);
  // The program's code is paged in: from now on, a second read of a name stalls.
  daemon_->signal(SIGUSR2);
  std::string out = dir_.path().string() + "/out.folded";
  auto run =
      run_flamebpf_until_done({"--pid", std::to_string(spinner.pid()), "-d", "3", "-o", out}, 60);
  expect_on_time(run, 3);
  EXPECT_NE(run.log.find("stalled.so: a read of a name got no answer"), std::string::npos)
      << run.log;
  EXPECT_LE(std::count(run.log.begin(), run.log.end(), '\n'), 4) << run.log;
  // Its frames are there, known by the file and offset until the file answers.
  auto folded = read_folded(out);
  EXPECT_GT(total_count(folded), 50u) << run.log;
  EXPECT_GT(count_containing(folded, "stalled.so+0x"), 50u) << run.log;
  EXPECT_EQ(count_containing(folded, "elf_spinner_inner"), 0u) << run.log;
}

} // namespace
} // namespace flamebpf::testing
