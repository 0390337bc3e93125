#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <optional>
#include <sys/mman.h>
#include <sys/wait.h>
#include <tuple>
#include <unistd.h>
#include <unordered_map>

#include "common/procfs.h"
#include "profile/accumulator.h"
#include "symbolize/perf_map_names.h"
#include "symbolize/symbolizer.h"
#include "test_support.h"
#include "wait.h"

namespace flamebpf::symbolize {

// Functions of the test binary itself whose addresses stand in for sampled frames. Not inlined,
// so each keeps its own symbol; the asm statement keeps the bodies from being merged.
[[gnu::noinline]] int symbolizer_test_leaf(int n)
{
  int acc = 0;
  for (int i = 0; i < n; ++i) {
    acc += i * i;
    asm volatile("" : "+r"(acc));
  }
  return acc;
}

[[gnu::noinline]] int symbolizer_test_caller(int n)
{
  int result = symbolizer_test_leaf(n) + 1;
  asm volatile("" : "+r"(result));
  return result;
}

namespace {

using profile::Frame;
using profile::FrameKind;

constexpr const char* kKernelSymbols = "ffffffff81000000 T _stext\n"
                                       "ffffffff81100000 T entry_SYSCALL_64\n"
                                       "ffffffff81200000 T do_syscall_64\n"
                                       "ffffffffc0a01000 t nft_do_chain\t[nf_tables]\n";

// The image id BPF would have given this process; any value serves, as long as it is consistent.
constexpr uint32_t kImageId = 1;

uint64_t address_of(int (*function)(int))
{
  return reinterpret_cast<uint64_t>(function);
}

std::string own_comm()
{
  std::ifstream in("/proc/self/comm");
  std::string comm;
  std::getline(in, comm);
  return comm;
}

class SymbolizerSelf : public ::testing::Test {
protected:
  void SetUp() override
  {
    auto kernel = KernelSymbols::parse(kKernelSymbols);
    ASSERT_TRUE(kernel.has_value()) << kernel.error().message;
    symbolizer_.emplace(std::make_unique<KallsymsNames>(std::move(*kernel)), SymbolizerOptions{},
                        "/proc");
    targets_.by_cgroup[77] = "docker/abc";
    targets_.by_pid[4242] = "java-4242";
  }

  // A RawProfile of one sample of this process.
  static profile::RawProfile one_sample(std::vector<uint64_t> user, std::vector<uint64_t> kernel)
  {
    profile::RawProfile raw;
    profile::RawSample sample;
    sample.tgid = static_cast<uint32_t>(::getpid());
    sample.image_id = kImageId;
    sample.user_frames = std::move(user);
    sample.kernel_frames = std::move(kernel);
    sample.count = 3;
    raw.samples.push_back(std::move(sample));
    return raw;
  }

  // A RawProfile of one sample of each image, with no frames.
  static profile::RawProfile samples_of(std::initializer_list<ImageKey> images)
  {
    profile::RawProfile raw;
    for (const auto& key : images) {
      profile::RawSample sample;
      sample.tgid = key.pid;
      sample.image_id = key.image_id;
      sample.count = 1;
      raw.samples.push_back(sample);
    }
    return raw;
  }

  // The frames of raw's only stack.
  std::vector<Frame> frames_of(const profile::RawProfile& raw)
  {
    auto symbolized = symbolizer_->symbolize(raw, targets_);
    EXPECT_TRUE(symbolized.has_value()) << symbolized.error().message;
    if (!symbolized || symbolized->stacks.size() != 1)
      return {};
    return symbolized->stacks[0].frames;
  }

  std::optional<Symbolizer> symbolizer_;
  profile::TargetNames targets_;
};

TEST_F(SymbolizerSelf, UserRootFirstThenKernel)
{
  // Innermost first, as the kernel records them: the interrupted instruction, then return
  // addresses, each looked up one byte earlier (at the call). The outermost kernel return address
  // is do_syscall_64's first byte, so the call was in entry_SYSCALL_64.
  auto raw =
      one_sample({address_of(&symbolizer_test_leaf) + 4, address_of(&symbolizer_test_caller) + 1},
                 {0xffffffffc0a01010, 0xffffffff81200010, 0xffffffff81200000});
  raw.start = std::chrono::system_clock::time_point(std::chrono::seconds(1));
  raw.end = std::chrono::system_clock::time_point(std::chrono::seconds(2));
  raw.counters.counts[FB_COUNTER_SAMPLES] = 3;
  auto symbolized = symbolizer_->symbolize(raw, targets_);
  ASSERT_TRUE(symbolized.has_value()) << symbolized.error().message;
  EXPECT_EQ(symbolized->start, raw.start);
  EXPECT_EQ(symbolized->end, raw.end);
  EXPECT_EQ(symbolized->counters[FB_COUNTER_SAMPLES], 3u);
  ASSERT_EQ(symbolized->stacks.size(), 1u);
  const auto& stack = symbolized->stacks[0];
  EXPECT_EQ(stack.pid, static_cast<uint32_t>(::getpid()));
  EXPECT_EQ(stack.comm, own_comm());
  EXPECT_EQ(stack.target, "host");
  EXPECT_EQ(stack.count, 3u);

  ASSERT_EQ(stack.frames.size(), 5u);
  EXPECT_EQ(stack.frames[0].name, "flamebpf::symbolize::symbolizer_test_caller(int)");
  EXPECT_EQ(stack.frames[0].kind, FrameKind::kNative);
  EXPECT_EQ(stack.frames[1].name, "flamebpf::symbolize::symbolizer_test_leaf(int)");
  EXPECT_EQ(stack.frames[1].kind, FrameKind::kNative);
  EXPECT_EQ(stack.frames[2], (Frame{"entry_SYSCALL_64", "", FrameKind::kKernel}));
  EXPECT_EQ(stack.frames[3], (Frame{"do_syscall_64", "", FrameKind::kKernel}));
  EXPECT_EQ(stack.frames[4], (Frame{"nft_do_chain", "nf_tables", FrameKind::kKernel}));
}

TEST_F(SymbolizerSelf, NativeFramesNameTheirFile)
{
  auto frames = frames_of(one_sample({address_of(&symbolizer_test_leaf)}, {}));
  ASSERT_EQ(frames.size(), 1u);
  char exe[4096] = {};
  ASSERT_GT(::readlink("/proc/self/exe", exe, sizeof exe - 1), 0);
  EXPECT_EQ(frames[0],
            (Frame{"flamebpf::symbolize::symbolizer_test_leaf(int)", exe, FrameKind::kNative}));
}

TEST_F(SymbolizerSelf, ReturnAddressesAreLookedUpAtTheCall)
{
  // A return address just past the end of one function belongs to the call in it: an outer
  // frame at the next function's first byte is symbolized one byte earlier.
  auto raw = one_sample({address_of(&symbolizer_test_leaf), address_of(&symbolizer_test_leaf)}, {});
  auto frames = frames_of(raw);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_NE(frames[0].name, "flamebpf::symbolize::symbolizer_test_leaf(int)");
  EXPECT_EQ(frames[1].name, "flamebpf::symbolize::symbolizer_test_leaf(int)");
}

TEST_F(SymbolizerSelf, SharedLibraryWithShiftedSegment)
{
  void* library = ::dlopen(FLAMEBPF_ELF_FIXTURE_SHIFTED, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(library, nullptr) << ::dlerror();
  auto* gamma = reinterpret_cast<int (*)(int)>(::dlsym(library, "fb_fixture_gamma"));
  auto* compute =
      reinterpret_cast<int (*)(int)>(::dlsym(library, "_ZN10fb_fixture7shifted7computeEi"));
  ASSERT_NE(gamma, nullptr);
  ASSERT_NE(compute, nullptr);

  auto frames = frames_of(one_sample({address_of(compute) + 2, address_of(gamma) + 3}, {}));
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].name, "fb_fixture_gamma");
  EXPECT_EQ(frames[0].kind, FrameKind::kNative);
  EXPECT_NE(frames[0].module.find("elf_fixture_shifted"), std::string::npos) << frames[0].module;
  EXPECT_EQ(frames[1].name, "fb_fixture::shifted::compute(int)");
  ::dlclose(library);
}

TEST_F(SymbolizerSelf, AddressesInNoMappingAreUnknown)
{
  auto frames = frames_of(one_sample({0x10, address_of(&symbolizer_test_caller) + 1}, {0x1000}));
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0].name, "flamebpf::symbolize::symbolizer_test_caller(int)");
  EXPECT_EQ(frames[1], (Frame{"[unknown]", "", FrameKind::kUnknown}));
  // Below the first kernel symbol.
  EXPECT_EQ(frames[2], (Frame{"[unknown]", "", FrameKind::kUnknown}));
}

TEST_F(SymbolizerSelf, AnonymousExecutableMemoryIsUnknown)
{
  long page = ::sysconf(_SC_PAGESIZE);
  void* code = ::mmap(nullptr, static_cast<size_t>(page), PROT_READ | PROT_EXEC,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(code, MAP_FAILED) << std::strerror(errno);
  auto frames = frames_of(one_sample({reinterpret_cast<uint64_t>(code) + 16}, {}));
  ::munmap(code, static_cast<size_t>(page));
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0], (Frame{"[unknown]", "", FrameKind::kUnknown}));
}

TEST_F(SymbolizerSelf, LostStacksAreMarked)
{
  auto raw = one_sample({address_of(&symbolizer_test_leaf)}, {});
  raw.samples[0].user_stack_lost = true;
  raw.samples[0].kernel_stack_lost = true;
  auto frames = frames_of(raw);
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0].name, "[user stack lost]");
  EXPECT_EQ(frames[1].name, "flamebpf::symbolize::symbolizer_test_leaf(int)");
  EXPECT_EQ(frames[2], (Frame{"[kernel stack lost]", "", FrameKind::kKernel}));
}

TEST_F(SymbolizerSelf, LostAndCutStacksCountTheirSamples)
{
  auto raw = one_sample({address_of(&symbolizer_test_leaf)}, {});
  raw.samples.push_back(raw.samples[0]);
  raw.samples[0].kernel_stack_lost = true;
  raw.samples[0].user_stack_cut = true; // lost wins: a sample is short for one reason
  raw.samples.push_back(raw.samples[1]);
  raw.samples[1].user_stack_cut = true;
  auto symbolized = symbolizer_->symbolize(raw, targets_);
  ASSERT_TRUE(symbolized.has_value());
  ASSERT_EQ(symbolized->stacks.size(), 3u);
  EXPECT_EQ(symbolized->stacks[0].lost_samples, 3u);
  EXPECT_EQ(symbolized->stacks[0].cut_samples, 0u);
  EXPECT_EQ(symbolized->stacks[1].lost_samples, 0u);
  EXPECT_EQ(symbolized->stacks[1].cut_samples, 3u);
  EXPECT_EQ(symbolized->stacks[2].lost_samples, 0u);
  EXPECT_EQ(symbolized->stacks[2].cut_samples, 0u);
}

TEST_F(SymbolizerSelf, TargetNamesComeFromCgroupIdsAndPids)
{
  auto raw = one_sample({}, {0xffffffff81200000});
  raw.samples[0].target_cgroup_id = 77;
  raw.samples.push_back(raw.samples[0]);
  raw.samples[1].target_cgroup_id = 78; // not a known target
  raw.samples.push_back(raw.samples[0]);
  raw.samples[2].target_cgroup_id = 0;
  raw.samples[2].tgid = 4242; // a --pid target
  raw.samples.push_back(raw.samples[2]);
  raw.samples[3].tgid = 4243; // no target at all
  auto symbolized = symbolizer_->symbolize(raw, targets_);
  ASSERT_TRUE(symbolized.has_value());
  ASSERT_EQ(symbolized->stacks.size(), 4u);
  EXPECT_EQ(symbolized->stacks[0].target, "docker/abc");
  EXPECT_EQ(symbolized->stacks[1].target, "host");
  EXPECT_EQ(symbolized->stacks[2].target, "java-4242");
  EXPECT_EQ(symbolized->stacks[3].target, "host");
  // The innermost kernel frame is not adjusted: the exact symbol address is its first byte.
  ASSERT_EQ(symbolized->stacks[0].frames.size(), 1u);
  EXPECT_EQ(symbolized->stacks[0].frames[0].name, "do_syscall_64");
}

TEST_F(SymbolizerSelf, UnmatchedSampleBelongsToTheTargetItsCgroupIsIn)
{
  // Sampled before its container's cgroup joined the kernel's filter: the process's own cgroup
  // (read when it was first seen) names the target.
  auto own = procfs::read_cgroup2_path(static_cast<uint32_t>(::getpid()));
  ASSERT_TRUE(own.has_value());
  auto raw = one_sample({}, {});
  targets_.by_cgroup_path = {{"/elsewhere", "other"}, {*own, "mine"}};
  auto symbolized = symbolizer_->symbolize(raw, targets_);
  ASSERT_TRUE(symbolized.has_value());
  EXPECT_EQ(symbolized->stacks[0].target, "mine");
  targets_.by_cgroup_path = {{*own + "x", "a sibling"}, {*own + "/child", "below"}};
  symbolized = symbolizer_->symbolize(raw, targets_);
  EXPECT_EQ(symbolized->stacks[0].target, "host");
}

TEST_F(SymbolizerSelf, SampleOfAPodTargetKnowsItsContainer)
{
  auto own = procfs::read_cgroup2_path(static_cast<uint32_t>(::getpid()));
  ASSERT_TRUE(own.has_value());
  auto raw = one_sample({}, {});
  targets_.by_cgroup_path = {{*own, "prod/shop"}};
  targets_.pod_containers_by_cgroup_path = {{*own + "x", "sibling"}, {*own, "web-id"}};
  auto symbolized = symbolizer_->symbolize(raw, targets_);
  ASSERT_TRUE(symbolized.has_value());
  EXPECT_EQ(symbolized->stacks[0].target, "prod/shop");
  EXPECT_EQ(symbolized->stacks[0].pod_container_id, "web-id");
  targets_.pod_containers_by_cgroup_path = {{*own + "/child", "below"}};
  symbolized = symbolizer_->symbolize(raw, targets_);
  EXPECT_EQ(symbolized->stacks[0].pod_container_id, "");
}

TEST_F(SymbolizerSelf, CommIsTheProcesssOwnNameWhileItLives)
{
  // The first sample's name is a thread's (or, inside execve, the old program's); the process's
  // own name wins while it can be read.
  symbolizer_->on_process_seen(ImageKey{static_cast<uint32_t>(::getpid()), kImageId}, "a thread");
  auto symbolized = symbolizer_->symbolize(one_sample({}, {}), targets_);
  ASSERT_TRUE(symbolized.has_value());
  ASSERT_EQ(symbolized->stacks.size(), 1u);
  std::string own_name;
  std::getline(std::ifstream("/proc/self/comm"), own_name);
  EXPECT_EQ(symbolized->stacks[0].comm, own_name);
  EXPECT_NE(own_name, "a thread");
  EXPECT_TRUE(symbolized->stacks[0].frames.empty());
}

TEST_F(SymbolizerSelf, CommFromTheFirstSampleOfAProcessAlreadyGone)
{
  // No such pid (above pid_max): nothing but the sample's name is known.
  ImageKey gone{0x7ffffff0u, kImageId};
  symbolizer_->on_process_seen(gone, "gone_too_soon");
  auto symbolized = symbolizer_->symbolize(samples_of({gone}), targets_);
  ASSERT_TRUE(symbolized.has_value());
  ASSERT_EQ(symbolized->stacks.size(), 1u);
  EXPECT_EQ(symbolized->stacks[0].comm, "gone_too_soon");
}

TEST_F(SymbolizerSelf, AProcessGoneBeforeItsCgroupWasReadBelongsToTheCgroupOfItsFirstSample)
{
  // Its container joined the kernel's filter after the process exited: only the cgroup id its
  // first sample carried says where it ran.
  ImageKey gone{0x7ffffff1u, kImageId};
  symbolizer_->on_process_seen(gone, "short_lived", 77);
  ImageKey unknown{0x7ffffff2u, kImageId};
  symbolizer_->on_process_seen(unknown, "elsewhere", 79);
  auto symbolized = symbolizer_->symbolize(samples_of({gone, unknown}), targets_);
  ASSERT_TRUE(symbolized.has_value());
  ASSERT_EQ(symbolized->stacks.size(), 2u);
  EXPECT_EQ(symbolized->stacks[0].target, "docker/abc");
  EXPECT_EQ(symbolized->stacks[1].target, "host");
}

// A process announced while flamebpf was busy, which exited before its capture: what /proc said
// at its announcement names it and its code, not "[unknown]".
TEST_F(SymbolizerSelf, AProcessThatExitedBeforeItsCaptureIsNamedFromItsSnapshot)
{
  pid_t child = ::fork();
  if (child == 0) {
    ::execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ASSERT_GT(child, 0);
  ASSERT_TRUE(testing::wait_until([&] { return procfs::read_comm(child).value_or("") == "sleep"; },
                                  std::chrono::seconds(10), "sleep to start"));
  ImageKey key{static_cast<uint32_t>(child), kImageId};
  symbolizer_->keep_snapshot(key);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ASSERT_FALSE(procfs::read_comm(child).has_value());

  // Captured at its first sample's symbolizing, with no notice handled before.
  auto symbolized = symbolizer_->symbolize(samples_of({key}), targets_);
  ASSERT_TRUE(symbolized.has_value());
  ASSERT_EQ(symbolized->stacks.size(), 1u);
  EXPECT_EQ(symbolized->stacks[0].comm, "sleep");
  const ProcessImage* image = symbolizer_->find_process(key);
  ASSERT_NE(image, nullptr);
  EXPECT_TRUE(image->maps_read);
  EXPECT_TRUE(std::any_of(image->code.begin(), image->code.end(), [](const MappedCode& code) {
    return code.mapping.path.ends_with("/sleep");
  }));
}

// Samples a process took between the buffers' switch and its exit are drained at the next
// interval: it is forgotten only at the end of the generation after the one that found it gone.
TEST_F(SymbolizerSelf, AnExitedProcessIsForgottenOneGenerationAfterItWasFoundGone)
{
  ImageKey gone{0x7ffffff3u, kImageId};
  symbolizer_->on_process_seen(gone, "short_lived");
  EXPECT_TRUE(symbolizer_->forget_exited_processes().empty());
  auto symbolized = symbolizer_->symbolize(samples_of({gone}), targets_);
  ASSERT_TRUE(symbolized.has_value());
  EXPECT_EQ(symbolized->stacks.at(0).comm, "short_lived");
  EXPECT_EQ(symbolizer_->forget_exited_processes(), std::vector<ImageKey>{gone});
  EXPECT_EQ(symbolizer_->find_process(gone), nullptr);
}

// The symbol cache is keyed by file, not by process: forty processes of one program (as fifty JVMs
// share libjvm.so) open its files once, and the cache outlives the processes' intervals.
TEST_F(SymbolizerSelf, ProcessesSharingFilesOpenThemOnce)
{
  std::vector<pid_t> children;
  auto spawn_sleep = [&] {
    pid_t child = ::fork();
    if (child == 0) {
      ::execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    children.push_back(child);
    return child;
  };
  spawn_sleep();
  ::usleep(100 * 1000); // exec done
  symbolizer_->on_process_seen({static_cast<uint32_t>(children[0]), kImageId}, "sleep");
  size_t files_for_one = symbolizer_->elf_files();
  for (int i = 0; i < 39; ++i)
    spawn_sleep();
  ::usleep(100 * 1000);
  for (pid_t child : children)
    symbolizer_->on_process_seen({static_cast<uint32_t>(child), kImageId}, "sleep");
  EXPECT_GE(files_for_one, 2u); // sleep and the C library at least
  EXPECT_EQ(symbolizer_->processes(), 40u);
  EXPECT_EQ(symbolizer_->elf_files(), files_for_one);
  for (pid_t child : children) {
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
  }
}

// A JIT process as /proc shows it, in a directory of the test's: this process's pid (so that it
// lives), anonymous code at kCode, and a perf map whose lines name that code.
class FakeJit : public ::testing::Test {
protected:
  static constexpr uint64_t kCode = 0x7f0000000000;

  void SetUp() override
  {
    pid_ = static_cast<uint32_t>(::getpid());
    std::string process = proc() + "/" + std::to_string(pid_);
    testing::write_file(process + "/maps", "7f0000000000-7f0000100000 r-xp 00000000 00:00 0 \n");
    std::string uid = std::to_string(::geteuid());
    testing::write_file(process + "/status", "Name:\tfakejit\nUid:\t" + uid + "\t" + uid + "\t" +
                                                 uid + "\t" + uid + "\nNSpid:\t" +
                                                 std::to_string(pid_) + "\t1\n");
    testing::write_file(process + "/comm", "fakejit\n");
    testing::write_file(process + "/cgroup", "0::/\n");
  }

  std::string proc() const { return dir_.path().string(); }

  // Writes the perf map: "<offset from kCode> <size> <name>" per line, offsets in hex.
  void map(const std::vector<std::tuple<uint64_t, uint64_t, std::string>>& lines)
  {
    std::string text;
    for (const auto& [offset, size, name] : lines)
      text += fmt::format("{:x} {:x} {}\n", kCode + offset, size, name);
    testing::write_file(proc() + "/" + std::to_string(pid_) + "/root/tmp/perf-1.map", text);
  }

  // Symbolizes one sample per stack (user frames innermost first, as offsets from kCode).
  profile::SymbolizedProfile symbolize(const std::vector<std::vector<uint64_t>>& stacks,
                                       SymbolizerOptions options = {})
  {
    auto kernel = KernelSymbols::parse(kKernelSymbols);
    EXPECT_TRUE(kernel.has_value());
    Symbolizer symbolizer(std::make_unique<KallsymsNames>(std::move(*kernel)), options, proc());
    profile::RawProfile raw;
    for (const auto& offsets : stacks) {
      profile::RawSample sample;
      sample.tgid = pid_;
      sample.image_id = kImageId;
      // Frames other than the innermost are looked up a byte early, at the call.
      for (size_t i = 0; i < offsets.size(); ++i)
        sample.user_frames.push_back(kCode + offsets[i] + (i == 0 ? 0 : 1));
      sample.count = 2;
      raw.samples.push_back(std::move(sample));
    }
    auto symbolized = symbolizer.symbolize(raw, {});
    EXPECT_TRUE(symbolized.has_value());
    return symbolized ? std::move(*symbolized) : profile::SymbolizedProfile{};
  }

  // methods copies of name joined as an inline chain.
  static std::string chain(const std::string& name, size_t methods)
  {
    std::string text = name;
    for (size_t i = 1; i < methods; ++i)
      text += "->" + name;
    return text;
  }

  testing::TempDir dir_;
  uint32_t pid_ = 0;
};

const Frame kTruncatedFrame{"[truncated]", "", FrameKind::kUnknown};

TEST_F(FakeJit, FramesAreNamedByThePerfMap)
{
  map({{0x0, 0x100, "Outer.run()->Inner.work(long)"}, {0x100, 0x100, "Leaf.spin()"}});
  auto profile = symbolize({{0x110, 0x10}});
  ASSERT_EQ(profile.stacks.size(), 1u);
  EXPECT_EQ(profile.stacks[0].frames, (std::vector<Frame>{{"Outer.run", "", FrameKind::kJit},
                                                          {"Inner.work", "", FrameKind::kInlined},
                                                          {"Leaf.spin", "", FrameKind::kJit}}));
  EXPECT_EQ(profile.symbolize_stats.truncated_names, 0u);
  EXPECT_EQ(profile.symbolize_stats.truncated_stacks, 0u);
}

// JIT code its perf map did not name when its interval was symbolized is named again, before the
// profile is written, from the lines the JIT appended since; the stacks that read alike then are
// one stack. Until then, unnamed code at two addresses is two stacks, which may be named apart.
TEST_F(FakeJit, CodeNamedAfterItsIntervalIsNamedAgainBeforeTheProfileIsWritten)
{
  map({{0x0, 0x100, "Outer.run()"}});
  auto kernel = KernelSymbols::parse(kKernelSymbols);
  ASSERT_TRUE(kernel.has_value());
  Symbolizer symbolizer(std::make_unique<KallsymsNames>(std::move(*kernel)), {}, proc());
  profile::RawProfile raw;
  for (uint64_t leaf : {0x110, 0x120, 0x310}) {
    profile::RawSample sample;
    sample.tgid = pid_;
    sample.image_id = kImageId;
    sample.user_frames = {kCode + leaf, kCode + 0x10 + 1};
    sample.count = 2;
    raw.samples.push_back(std::move(sample));
  }
  auto symbolized = symbolizer.symbolize(raw, {});
  ASSERT_TRUE(symbolized.has_value());
  profile::Accumulator interval;
  interval.add(std::move(*symbolized));
  profile::SymbolizedProfile profile = interval.take();
  ASSERT_EQ(profile.stacks.size(), 3u) << "unnamed code at three addresses";
  EXPECT_EQ(profile.symbolize_stats.jit_unnamed, 3u);
  for (const auto& stack : profile.stacks) {
    ASSERT_EQ(stack.frames.size(), 2u);
    EXPECT_EQ(stack.frames[1].name, "[unknown]");
    EXPECT_NE(stack.frames[1].late, 0u);
  }

  // The JIT writes its next method; the perf map is read again in the next generation.
  map({{0x0, 0x100, "Outer.run()"}, {0x100, 0x100, "Leaf.spin()"}});
  symbolizer.forget_exited_processes();
  symbolizer.name_late(profile);
  ASSERT_EQ(profile.stacks.size(), 2u);
  std::map<std::string, uint64_t> counts;
  for (const auto& stack : profile.stacks) {
    ASSERT_EQ(stack.frames.size(), 2u);
    counts[stack.frames[1].name] += stack.count;
  }
  EXPECT_EQ(counts["Leaf.spin"], 4u);
  EXPECT_EQ(counts["[unknown]"], 2u) << "code no line names stays unnamed";
  EXPECT_EQ(profile.symbolize_stats.jit_unnamed, 1u);
  for (const auto& stack : profile.stacks)
    for (const auto& frame : stack.frames)
      EXPECT_EQ(frame.late, 0u) << "written, the frames are final";
  EXPECT_EQ(symbolizer.late_frames(), 3u);
  symbolizer.forget_late_frames();
  EXPECT_EQ(symbolizer.late_frames(), 0u);
}

// A process captured inside execve (its new memory image has no code mapped yet, its name is still
// the old program's) is captured again at its first address, in the same interval.
TEST_F(FakeJit, AProcessCapturedInsideExecveIsCapturedAgainAtItsFirstAddress)
{
  std::string process = proc() + "/" + std::to_string(pid_);
  std::string loaded_maps = "7f0000000000-7f0000100000 r-xp 00000000 00:00 0 \n"; // as SetUp's
  testing::write_file(process + "/maps",
                      "7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0 [stack]\n");
  testing::write_file(process + "/comm", "launcher\n");
  auto kernel = KernelSymbols::parse(kKernelSymbols);
  ASSERT_TRUE(kernel.has_value());
  Symbolizer symbolizer(std::make_unique<KallsymsNames>(std::move(*kernel)), {}, proc());
  symbolizer.on_process_seen({pid_, kImageId}, "launcher");

  // execve ends: the program's code and name.
  testing::write_file(process + "/maps", loaded_maps);
  testing::write_file(process + "/comm", "fakejit\n");
  map({{0x0, 0x100, "Leaf.spin()"}});
  profile::RawProfile raw;
  profile::RawSample sample;
  sample.tgid = pid_;
  sample.image_id = kImageId;
  sample.user_frames = {kCode + 0x10};
  sample.count = 1;
  raw.samples.push_back(sample);
  auto profile = symbolizer.symbolize(raw, {});
  ASSERT_TRUE(profile.has_value());
  ASSERT_EQ(profile->stacks.size(), 1u);
  EXPECT_EQ(profile->stacks[0].comm, "fakejit");
  EXPECT_EQ(profile->stacks[0].frames, (std::vector<Frame>{{"Leaf.spin", "", FrameKind::kJit}}));
}

// A process captured while its loader still maps its code (a launcher's libraries, the runtime it
// loads) has samples in code its maps did not have, and its maps were read in that generation
// already: they are read again at the generation's end, so that what it mapped counts even if no
// later sample asks (a JVM that waits as it starts is met as a JVM).
TEST_F(FakeJit, AProcessWhoseCodeASampleMissedAsItStartedIsReadAgainAtTheGenerationsEnd)
{
  constexpr uint64_t kLibrary = 0x7f2000000000;
  std::string process = proc() + "/" + std::to_string(pid_);
  std::string started_maps = "7f0000000000-7f0000100000 r-xp 00000000 00:00 0 \n"; // as SetUp's
  std::string loaded_maps = started_maps + "7f2000000000-7f2000100000 r-xp 00000000 00:00 0 \n";
  auto kernel = KernelSymbols::parse(kKernelSymbols);
  ASSERT_TRUE(kernel.has_value());
  Symbolizer symbolizer(std::make_unique<KallsymsNames>(std::move(*kernel)), {}, proc());
  ImageKey key{pid_, kImageId};
  symbolizer.on_process_seen(key, "fakejit");
  // The library is mapped after the capture; a sample of it in the same generation finds no code.
  testing::write_file(process + "/maps", loaded_maps);
  profile::RawProfile raw;
  profile::RawSample sample;
  sample.tgid = pid_;
  sample.image_id = kImageId;
  sample.user_frames = {kLibrary + 0x10};
  sample.count = 1;
  raw.samples.push_back(sample);
  ASSERT_TRUE(symbolizer.symbolize(raw, {}).has_value());
  ASSERT_NE(symbolizer.find_process(key), nullptr);
  EXPECT_EQ(symbolizer.find_process(key)->code.size(), 1u) << "read once in a generation";

  symbolizer.forget_exited_processes();
  ASSERT_NE(symbolizer.find_process(key), nullptr);
  ASSERT_EQ(symbolizer.find_process(key)->code.size(), 2u) << "read again at its end";
  EXPECT_EQ(symbolizer.find_process(key)->code[1].mapping.start, kLibrary);

  // Read in a generation after its first, a process with unknown code is read once per
  // generation: at the sample that misses, never again at the generation's end.
  std::string more_maps = loaded_maps + "7f3000000000-7f3000100000 r-xp 00000000 00:00 0 \n";
  testing::write_file(process + "/maps", more_maps);
  sample.user_frames = {0x7f3000000010};
  raw.samples = {sample};
  ASSERT_TRUE(symbolizer.symbolize(raw, {}).has_value());
  EXPECT_EQ(symbolizer.find_process(key)->code.size(), 3u) << "read at the miss";
  testing::write_file(process + "/maps",
                      more_maps + "7f4000000000-7f4000100000 r-xp 00000000 00:00 0 \n");
  sample.user_frames = {0x7f4000000010};
  raw.samples = {sample};
  ASSERT_TRUE(symbolizer.symbolize(raw, {}).has_value());
  symbolizer.forget_exited_processes();
  EXPECT_EQ(symbolizer.find_process(key)->code.size(), 3u) << "not read again at the end";
}

TEST_F(FakeJit, InlineChainBeyondItsBudgetIsCutVisibly)
{
  map({{0x0, 0x100, chain("R.r()", 9300)}});
  auto profile = symbolize({{0x10}});
  ASSERT_EQ(profile.stacks.size(), 1u);
  const auto& frames = profile.stacks[0].frames;
  ASSERT_EQ(frames.size(), kMaxInlineFrames + 1);
  EXPECT_EQ(frames[0], (Frame{"R.r", "", FrameKind::kJit}));
  EXPECT_EQ(frames.back(), kTruncatedFrame);
  EXPECT_EQ(profile.symbolize_stats.truncated_stacks, 1u);
  // The reader cut the name to its budget first.
  EXPECT_EQ(profile.symbolize_stats.truncated_names, 1u);
}

TEST_F(FakeJit, StackBeyondItsFrameBudgetKeepsItsInnermostFrames)
{
  // Recursion through code that inlines ten methods, under an outer method, above a leaf.
  map({{0x0, 0x100, "Outer.o()"}, {0x100, 0x100, chain("R.r()", 10)}, {0x200, 0x100, "Leaf.l()"}});
  std::vector<uint64_t> offsets{0x210};
  for (int depth = 0; depth < 10; ++depth)
    offsets.push_back(0x110);
  offsets.push_back(0x10);
  SymbolizerOptions options;
  options.max_stack_frames = 40;
  auto profile = symbolize({offsets}, options);
  ASSERT_EQ(profile.stacks.size(), 1u);
  const auto& frames = profile.stacks[0].frames;
  // 102 frames, cut to 39 under one mark.
  ASSERT_EQ(frames.size(), 40u);
  EXPECT_EQ(frames[0], kTruncatedFrame);
  EXPECT_EQ(frames.back(), (Frame{"Leaf.l", "", FrameKind::kJit}));
  EXPECT_EQ(frames[frames.size() - 2], (Frame{"R.r", "", FrameKind::kInlined}));
  EXPECT_EQ(profile.stacks[0].count, 2u);
  EXPECT_EQ(profile.symbolize_stats.truncated_stacks, 1u);
}

TEST_F(FakeJit, StackBeyondItsNameBytesKeepsItsInnermostFrames)
{
  std::string name =
      "Long.name_of_thirty_bytes_x()"; // 29 bytes, "Long.name_of_thirty_bytes_x" shown
  map({{0x0, 0x100, name}, {0x100, 0x100, "Leaf.l()"}});
  SymbolizerOptions options;
  options.max_stack_name_bytes = 100;
  auto profile = symbolize({{0x110, 0x10, 0x10, 0x10, 0x10, 0x10}}, options);
  ASSERT_EQ(profile.stacks.size(), 1u);
  // Leaf.l (6 bytes) and three of 27 bytes fit in 100, a fourth does not.
  EXPECT_EQ(profile.stacks[0].frames,
            (std::vector<Frame>{kTruncatedFrame,
                                {"Long.name_of_thirty_bytes_x", "", FrameKind::kJit},
                                {"Long.name_of_thirty_bytes_x", "", FrameKind::kJit},
                                {"Long.name_of_thirty_bytes_x", "", FrameKind::kJit},
                                {"Leaf.l", "", FrameKind::kJit}}));
  EXPECT_EQ(profile.symbolize_stats.truncated_stacks, 1u);
}

TEST_F(FakeJit, FrameNameBeyondItsBudgetIsCutVisibly)
{
  map({{0x0, 0x100, "stub " + std::string(100, 'x')}});
  SymbolizerOptions options;
  options.max_frame_name = 32;
  auto profile = symbolize({{0x10}}, options);
  ASSERT_EQ(profile.stacks.size(), 1u);
  ASSERT_EQ(profile.stacks[0].frames.size(), 1u);
  EXPECT_EQ(profile.stacks[0].frames[0].name, "stub xxxxxxxxxxxxxxxx[truncated]");
  EXPECT_EQ(profile.symbolize_stats.truncated_names, 1u);
  EXPECT_EQ(profile.symbolize_stats.truncated_stacks, 0u);
}

TEST_F(FakeJit, ProfileBeyondItsNameBytesKeepsTheCountsOfLaterStacks)
{
  map({{0x0, 0x100, "First.twenty_bytes_1()"},
       {0x100, 0x100, "First.twenty_bytes_2()"},
       {0x200, 0x100, "First.twenty_bytes_3()"}});
  SymbolizerOptions options;
  options.max_profile_name_bytes = 50;
  auto profile = symbolize({{0x10}, {0x110}, {0x210}}, options);
  ASSERT_EQ(profile.stacks.size(), 3u);
  EXPECT_EQ(profile.stacks[0].frames[0].name, "First.twenty_bytes_1");
  EXPECT_EQ(profile.stacks[1].frames[0].name, "First.twenty_bytes_2");
  EXPECT_EQ(profile.stacks[2].frames, std::vector<Frame>{kTruncatedFrame});
  EXPECT_EQ(profile.stacks[2].count, 2u);
  EXPECT_EQ(profile.total_samples(), 6u);
  EXPECT_EQ(profile.symbolize_stats.truncated_stacks, 1u);
}

} // namespace
} // namespace flamebpf::symbolize
