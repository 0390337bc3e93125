#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bpf_abi.h"
#include "runtimes/hotspot/hotspot_runtime.h"
#include "symbolize/kallsyms.h"
#include "symbolize/symbolizer.h"
#include "test_support.h"

namespace flamebpf::hotspot {
namespace {

using profile::Frame;
using profile::FrameKind;
using symbolize::ImageKey;
using symbolize::Symbolizer;

constexpr uint32_t kImageId = 1;
constexpr uint64_t kCode = 0x7f0000000000;

// A symbolizer over proc_root with HotSpot as its only runtime, which attaches to nothing; the
// runtime stays reachable through runtime.
std::unique_ptr<Symbolizer> symbolizer_with_hotspot(const std::string& proc_root,
                                                    HotSpotRuntime** runtime)
{
  auto kernel = symbolize::KernelSymbols::parse("ffffffff81000000 T _stext\n");
  EXPECT_TRUE(kernel.has_value());
  auto symbolizer =
      std::make_unique<Symbolizer>(std::make_unique<symbolize::KallsymsNames>(std::move(*kernel)),
                                   symbolize::SymbolizerOptions{}, proc_root);
  HotSpotOptions options;
  options.attacher.attach = false;
  options.attacher.proc_root = proc_root;
  auto hotspot = std::make_unique<HotSpotRuntime>(options);
  *runtime = hotspot.get();
  symbolizer->add_runtime(std::move(hotspot));
  return symbolizer;
}

// One sample of image with the given user frames (innermost first).
profile::RawProfile sample_of(const ImageKey& image, std::vector<uint64_t> frames)
{
  profile::RawProfile raw;
  profile::RawSample sample;
  sample.tgid = image.pid;
  sample.image_id = image.image_id;
  sample.user_frames = std::move(frames);
  sample.count = 1;
  raw.samples.push_back(std::move(sample));
  return raw;
}

// A file of the given name mapped as code into the test process, as a launcher maps libjli.so
// and then libjvm.so. Made beside the test binary: /tmp may be mounted noexec.
class FakeLibraryMapping {
public:
  explicit FakeLibraryMapping(const std::string& name)
  {
    std::string dir_template =
        std::filesystem::read_symlink("/proc/self/exe").parent_path().string() + "/lib-XXXXXX";
    EXPECT_NE(::mkdtemp(dir_template.data()), nullptr);
    dir_ = dir_template;
    file_ = dir_ + "/" + name;
    std::ofstream(file_) << std::string(4096, '\0');
    int fd = ::open(file_.c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd, 0);
    mapped_ = ::mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
    ::close(fd);
    EXPECT_NE(mapped_, MAP_FAILED);
  }
  ~FakeLibraryMapping()
  {
    ::munmap(mapped_, 4096);
    ::unlink(file_.c_str());
    ::rmdir(dir_.c_str());
  }
  // An address in no code mapping: symbolizing it makes the symbolizer re-read the maps.
  uint64_t address() const { return reinterpret_cast<uint64_t>(mapped_); }

private:
  std::string dir_;
  std::string file_;
  void* mapped_ = nullptr;
};

// A launcher sampled before it loads the VM becomes a JVM at a later capture, and is found then,
// once.
TEST(HotSpotRuntime, ProcessFoundToBeAJvmOnALaterCaptureIsFoundOnce)
{
  HotSpotRuntime* hotspot = nullptr;
  auto symbolizer = symbolizer_with_hotspot("/proc", &hotspot);
  ImageKey self{static_cast<uint32_t>(::getpid()), kImageId};
  symbolizer->on_process_seen(self, "");
  EXPECT_EQ(hotspot->jvms_found(), 0u);
  FakeLibraryMapping vm("libjvm.so");
  // The next interval finds an address outside every known code mapping: a capture again.
  symbolizer->forget_exited_processes();
  ASSERT_TRUE(symbolizer->symbolize(sample_of(self, {vm.address()}), {}).has_value());
  EXPECT_EQ(hotspot->jvms_found(), 1u);
  EXPECT_EQ(hotspot->jvms(), 1u);

  symbolizer->forget_exited_processes();
  ASSERT_TRUE(symbolizer->symbolize(sample_of(self, {vm.address()}), {}).has_value());
  EXPECT_EQ(hotspot->jvms_found(), 1u);
}

// A java launcher that loads the VM and is then not sampled again (a JVM paused at its start
// uses no CPU) is found a JVM at the end of an interval all the same.
TEST(HotSpotRuntime, LauncherIsFoundAJvmWithNoFurtherSample)
{
  HotSpotRuntime* hotspot = nullptr;
  auto symbolizer = symbolizer_with_hotspot("/proc", &hotspot);
  ImageKey self{static_cast<uint32_t>(::getpid()), kImageId};
  FakeLibraryMapping launcher("libjli.so");
  symbolizer->on_process_seen(self, "");
  EXPECT_EQ(hotspot->jvms_found(), 0u);
  FakeLibraryMapping vm("libjvm.so");
  symbolizer->forget_exited_processes();
  EXPECT_EQ(hotspot->jvms_found(), 1u);
  symbolizer->forget_exited_processes();
  EXPECT_EQ(hotspot->jvms_found(), 1u);
}

// A process that is no launcher is not read again unsampled.
TEST(HotSpotRuntime, ProcessThatIsNoLauncherIsNotReadAgainUnsampled)
{
  HotSpotRuntime* hotspot = nullptr;
  auto symbolizer = symbolizer_with_hotspot("/proc", &hotspot);
  ImageKey self{static_cast<uint32_t>(::getpid()), kImageId};
  symbolizer->on_process_seen(self, "");
  FakeLibraryMapping vm("libjvm.so");
  symbolizer->forget_exited_processes();
  EXPECT_EQ(hotspot->jvms_found(), 0u);
}

// A JVM as /proc shows it, below proc: this process's pid (so that it lives), libjvm.so and
// anonymous code at kCode, a perf map naming that code, and the agent's records. Returns the
// directory of the process.
std::string fake_jvm(const std::string& proc)
{
  uint32_t pid = static_cast<uint32_t>(::getpid());
  std::string process = proc + "/" + std::to_string(pid);
  testing::write_file(
      process + "/maps",
      "7e0000000000-7e0000001000 r-xp 00000000 08:01 42 /opt/jdk/lib/server/libjvm.so\n"
      "7f0000000000-7f0000100000 r-xp 00000000 00:00 0 \n");
  std::string uid = std::to_string(::geteuid());
  testing::write_file(process + "/status", "Name:\tjava\nUid:\t" + uid + "\t" + uid + "\t" + uid +
                                               "\t" + uid + "\nNSpid:\t" + std::to_string(pid) +
                                               "\t1\n");
  testing::write_file(process + "/comm", "java\n");
  testing::write_file(process + "/cgroup", "0::/\n");
  testing::write_file(process + "/root/tmp/perf-1.map", "7f0000000100 100 Leaf.spin()\n");
  testing::write_file(process + "/root/tmp/flamebpf-1.unwind",
                      "flamebpf-unwind 1\nmethod 7f3b0b400338 org.example.Foo.bar(long)\n");
  return process;
}

TEST(HotSpotRuntime, InterpretedFramesAreNamedByTheJvmRecords)
{
  testing::TempDir dir;
  std::string proc = dir.path().string();
  uint32_t pid = static_cast<uint32_t>(::getpid());
  fake_jvm(proc);
  HotSpotRuntime* hotspot = nullptr;
  auto symbolizer = symbolizer_with_hotspot(proc, &hotspot);
  // Innermost first: compiled code, then two interpreter frames by their Method*, one the
  // records name and one they do not. A Method* is no return address: never moved back a byte.
  auto profile = symbolizer->symbolize(
      sample_of({pid, kImageId}, {kCode + 0x110, FB_FRAME_RUNTIME_MARKER | 0x7f3b0b400338,
                                  FB_FRAME_RUNTIME_MARKER | 0x7f3b0b400339}),
      {});
  ASSERT_TRUE(profile.has_value());
  ASSERT_EQ(profile->stacks.size(), 1u);
  EXPECT_EQ(profile->stacks[0].frames,
            (std::vector<Frame>{{"Interpreter", "", FrameKind::kInterpreted},
                                {"org.example.Foo.bar", "", FrameKind::kInterpreted},
                                {"Leaf.spin", "", FrameKind::kJit}}));
  EXPECT_EQ(hotspot->jvms_found(), 1u);
}

// A node's JVMs mostly compile nothing for long: a perf map that stays as it was is read at ever
// fewer polls, at least every kMostPollsSkipped + 1; one that grows, at every poll.
TEST(HotSpotRuntime, QuietPerfMapsAreReadAtFewerPollsAndGrowingOnesAtEach)
{
  testing::TempDir dir;
  std::string proc = dir.path().string();
  uint32_t pid = static_cast<uint32_t>(::getpid());
  std::string map = fake_jvm(proc) + "/root/tmp/perf-1.map";
  HotSpotRuntime* hotspot = nullptr;
  auto symbolizer = symbolizer_with_hotspot(proc, &hotspot);
  ASSERT_TRUE(symbolizer->symbolize(sample_of({pid, kImageId}, {kCode + 0x110}), {}).has_value());
  ASSERT_EQ(hotspot->jvms(), 1u);
  auto entries = [&] {
    auto maps = symbolizer->perf_maps();
    return maps.size() == 1 ? maps[0].entries : 0;
  };
  ASSERT_EQ(entries(), 1u);
  uint64_t next_start = 0x7f0000000200;
  auto append = [&] {
    std::ofstream(map, std::ios::app) << std::hex << next_start << " 10 Grown.method()\n";
    next_start += 0x10;
  };
  for (int quiet = 0; quiet < 20; ++quiet)
    symbolizer->poll_runtimes();
  append();
  int polls = 0;
  while (entries() == 1u && polls <= 20) {
    symbolizer->poll_runtimes();
    ++polls;
  }
  EXPECT_GE(polls, 2) << "a quiet map was read at every poll";
  EXPECT_LE(polls, static_cast<int>(HotSpotRuntime::kMostPollsSkipped) + 1);
  // Growing, it is read at every poll again.
  for (size_t grown = 0; grown < 5; ++grown) {
    append();
    symbolizer->poll_runtimes();
    EXPECT_EQ(entries(), 3 + grown) << "a growing map was not read at poll " << grown;
  }
}

// A JVM named from outside has no perf map: once quiet, the map's path is looked up in its
// container less often than a map is read (at least every kMostPollsSkippedWithoutMap + 1 polls),
// and a map that appears then is read.
TEST(HotSpotRuntime, AbsentPerfMapsAreLookedForAtFewerPollsStill)
{
  testing::TempDir dir;
  std::string proc = dir.path().string();
  uint32_t pid = static_cast<uint32_t>(::getpid());
  std::string map = fake_jvm(proc) + "/root/tmp/perf-1.map";
  std::filesystem::remove(map);
  HotSpotRuntime* hotspot = nullptr;
  auto symbolizer = symbolizer_with_hotspot(proc, &hotspot);
  ASSERT_TRUE(symbolizer->symbolize(sample_of({pid, kImageId}, {kCode + 0x110}), {}).has_value());
  ASSERT_EQ(hotspot->jvms(), 1u);
  ASSERT_TRUE(symbolizer->perf_maps().empty());
  for (int quiet = 0; quiet < 70; ++quiet)
    symbolizer->poll_runtimes();
  testing::write_file(map, "7f0000000100 100 Leaf.spin()\n");
  int polls = 0;
  while (symbolizer->perf_maps().empty() && polls <= 100) {
    symbolizer->poll_runtimes();
    ++polls;
  }
  EXPECT_GT(polls, static_cast<int>(HotSpotRuntime::kMostPollsSkipped) + 1)
      << "an absent map was looked for as often as a quiet one is read";
  EXPECT_LE(polls, static_cast<int>(HotSpotRuntime::kMostPollsSkippedWithoutMap) + 1);
}

} // namespace
} // namespace flamebpf::hotspot
