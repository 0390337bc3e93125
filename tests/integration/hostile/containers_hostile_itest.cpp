// flamebpf against hostile containers (issue "Hardening", point 1). A container owns its /tmp, so
// it can make its perf map, its /tmp or the agent's drop path a symlink (absolute, relative,
// through /proc/self), a FIFO, a device, a sparse 10 GB file, a file that grows while flamebpf
// reads it, a file of 1 MB lines, binary garbage or addresses that overflow; it can pose as a JVM
// whose attach socket never answers or answers garbage; and it can forge process and cgroup names
// with ';', newlines, "_[k]" and markup. Through all of that flamebpf must read and write nothing
// outside the container's root, never block, keep its memory bounded, count what it skipped, and
// write folded, SVG and pprof output that still parse.
//
// The workload is tests/progs/jit_spinner, bind-mounted into the burner image: it spins in code it
// generated in anonymous executable memory, which flamebpf names from the process's perf map, so
// every hostile perf map is read without a JVM.
#include <gtest/gtest.h>

#include "common/utf8.h"
#include "hostile_harness.h"
#include "proto/profile.pb.h"

namespace flamebpf::testing {
namespace {

// --- perf maps ---

TEST_F(HostileContainerTest, PerfMapLinksAndSpecialFilesReadNothingOutsideTheContainer)
{
  HostSecrets host;
  const std::string& hostdir = host.dir();
  std::string up = "../../../../../../../.."; // more ".." than /tmp has parents
  // name -> the spinner's arguments. hl-control's valid map shows that the others' maps would
  // be read if they were acceptable.
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases{
      {"hl-control", {"valid", "JitSpinner.control"}},
      {"hl-abs", {"--link", "/tmp/perf-%p.map=" + host.map(), "none"}},
      {"hl-rel", {"--link", "/tmp/perf-%p.map=" + up + host.map(), "none"}},
      {"hl-proc-root", {"--link", "/tmp/perf-%p.map=/proc/self/root" + host.map(), "none"}},
      {"hl-proc-cwd", {"--link", "/tmp/perf-%p.map=/proc/self/cwd" + host.map(), "none"}},
      {"hl-zero", {"--link", "/tmp/perf-%p.map=/dev/zero", "none"}},
      {"hl-fifo", {"fifo"}},
      {"hl-device", {"device"}},
      {"hl-tmp-abs", {"--link", "/tmp=" + hostdir, "none"}},
      {"hl-tmp-rel", {"--link", "/tmp=" + up + hostdir, "none"}},
      // The link's target exists in the container too: flamebpf reads the container's map there.
      {"hl-tmp-inside",
       {"--mkdir", "/var", "--mkdir", "/var/tmp", "--mkdir", hostdir, "--link", "/tmp=" + hostdir,
        "valid", "Inside.ok"}},
  };
  for (const auto& [name, args] : cases)
    spin(name, args);

  AccessWatch watch({hostdir});
  std::string out = dir_.path().string() + "/out";
  fs::create_directories(out);
  auto run = run_measured(
      {"--all-containers", "--containers-only", "-d", "3", "-o", out + "/links.folded"},
      dir_.path());
  auto accesses = watch.events();
  print_figures("links and special files", run);
  expect_prompt(run, 3);
  EXPECT_TRUE(accesses.empty()) << "flamebpf touched the host's files:\n"
                                << ::testing::PrintToString(accesses);
  expect_no_secret(run, out);
  host.expect_untouched();

  for (const auto& [name, args] : cases) {
    std::string file = out + "/links." + name + ".folded";
    std::string text = read_text(file);
    EXPECT_EQ(folded_problems(text), "") << name;
    auto stacks = parse_folded(text);
    uint64_t samples = total_count(stacks);
    EXPECT_GT(samples, 10u) << name << " was hardly sampled\n" << describe(run);
    uint64_t named =
        count_containing(stacks, "JitSpinner.control") + count_containing(stacks, "Inside.ok");
    if (name == "hl-control" || name == "hl-tmp-inside") {
      EXPECT_GT(named * 2, samples) << name << ": its own map was not read\n" << text;
    } else {
      // Nothing named the generated code: the leaf stays unknown.
      EXPECT_EQ(named, 0u) << name << "\n" << text;
      EXPECT_GT(count_containing(stacks, "[unknown]") * 2, samples) << name << "\n" << text;
    }
  }
}

TEST_F(HostileContainerTest, SparseTenGigabyteMapIsReadInBoundedSteps)
{
  auto run =
      profile_heavy_map("hm-sparse", {"sparse", "JitSpinner.sparse"}, "JitSpinner.sparse", true);
  // The hole is one endless line of NULs: skipped, and said once.
  auto warnings = lines_with(run.log, "/root/tmp/perf-1.map: skipped ");
  EXPECT_EQ(warnings.size(), 1u) << run.log;
}

TEST_F(HostileContainerTest, MapThatGrowsWhileReadKeepsMemoryBounded)
{
  // 64 MiB/s of new distinct entries, the map polled four times a second.
  profile_heavy_map("hm-grow", {"grow", "JitSpinner.grow"}, "JitSpinner.grow", true);
}

TEST_F(HostileContainerTest, MegabyteLinesAreSkippedAndCounted)
{
  auto run = profile_heavy_map("hm-long", {"long", "JitSpinner.long"}, "JitSpinner.long", false);
  auto warnings = lines_with(run.log, "/root/tmp/perf-1.map: skipped 64 malformed lines");
  EXPECT_EQ(warnings.size(), 1u) << run.log;
}

TEST_F(HostileContainerTest, GarbageAndOverflowingAddressesAreSkippedAndCounted)
{
  auto run = profile_heavy_map("hm-garbage", {"garbage", "JitSpinner.garbage"},
                               "JitSpinner.garbage", false);
  auto warnings = lines_with(run.log, "/root/tmp/perf-1.map: skipped ");
  ASSERT_EQ(warnings.size(), 1u) << run.log;
  // At least the nine overflowing or malformed lines after the noise.
  auto at = warnings[0].find("skipped ") + 8;
  EXPECT_GE(std::strtoull(warnings[0].c_str() + at, nullptr, 10), 9u) << warnings[0];
  EXPECT_EQ(run.log.find("Overflow."), std::string::npos) << run.log;
  EXPECT_EQ(read_text(dir_.path().string() + "/out/hm-garbage.folded").find("Overflow."),
            std::string::npos);
}

// --- JVM attach ---

// A fake JVM: maps a file named libjvm.so and claims -XX:+PreserveFramePointer, so flamebpf
// attaches to it and has nothing else to warn about.
std::vector<std::string> fake_jvm(const std::vector<std::string>& extra)
{
  std::vector<std::string> args{"--jvm", "-XX:+PreserveFramePointer"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TEST_F(HostileContainerTest, SilentAttachSocketCostsOneTimeout)
{
  auto [run, line] = profile_fake_jvm("ha-silent", "silent", true);
  EXPECT_NE(line.find("timeout"), std::string::npos) << run.log;
}

TEST_F(HostileContainerTest, GarbageAttachReplyFailsAtOnce)
{
  auto [run, line] = profile_fake_jvm("ha-garbage", "garbage", false);
  // The reply's markup and bytes are not passed on raw.
  EXPECT_EQ(run.log.find("\xde\xad"), std::string::npos) << run.log;
}

TEST_F(HostileContainerTest, EndlessAttachReplyCostsOneTimeoutAndBoundedMemory)
{
  auto [run, line] = profile_fake_jvm("ha-flood", "flood", true);
  EXPECT_LT(run.max_rss_kb, kRssBoundKb) << describe(run);
}

TEST_F(HostileContainerTest, AgentFollowsATmpLinkOnlyInsideTheContainer)
{
  HostSecrets host;
  // The container's /tmp is a link to a path that exists on the host and in the container.
  auto jvm =
      spin("hd-tmp", fake_jvm({"--mkdir", "/var", "--mkdir", "/var/tmp", "--mkdir", host.dir(),
                               "--link", "/tmp=" + host.dir(), "--socket", "garbage", "none"}));
  AccessWatch watch({host.dir()});
  auto run = run_measured(
      {"--cgroup", "hd-tmp", "-d", "3", "-o", dir_.path().string() + "/out.folded"}, dir_.path());
  auto accesses = watch.events();
  expect_prompt(run, 3);
  EXPECT_TRUE(accesses.empty()) << ::testing::PrintToString(accesses);
  host.expect_untouched();
  // The agent went where the link leads inside the container.
  std::string inside = "/proc/" + std::to_string(jvm.pid) + "/root" + host.dir() + "/" +
                       hotspot::agent_file_name(hotspot::agent_library());
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(inside))) << inside << "\n" << run.log;
  auto about_jvm = lines_with(run.log, "JVM " + std::to_string(jvm.pid) + " ");
  EXPECT_EQ(about_jvm.size(), 1u) << run.log;
}

TEST_F(HostileContainerTest, PlantedAgentAndSocketLinksAreRefused)
{
  HostSecrets host;
  HostSocket host_socket(host.dir() + "/host.sock");
  std::string agent = hotspot::agent_file_name(hotspot::agent_library());
  // Every place the agent could go is a link to the host: the agent's own name in /tmp, the whole
  // of /var/tmp; /dev/shm is mounted noexec.
  auto planted = spin("hd-agent",
                      fake_jvm({"--link", "/tmp/" + agent + "=" + host.victim(), "--mkdir", "/var",
                                "--link", "/var/tmp=" + host.dir(), "--socket", "silent", "none"}));
  // The attach socket is a link to a socket of the host.
  auto socket_link = spin(
      "hd-socket", fake_jvm({"--link", "/tmp/.java_pid%p=" + host.dir() + "/host.sock", "none"}));
  AccessWatch watch({host.dir()});
  auto run = run_measured({"--all-containers", "--containers-only", "-d", "3", "-o",
                           dir_.path().string() + "/out.folded"},
                          dir_.path());
  auto accesses = watch.events();
  print_figures("planted agent and socket links", run);
  // The agent goes under a fresh name beside the link, and the silent socket costs a timeout.
  expect_prompt(run, 3, kAttachTimeoutSeconds);
  EXPECT_TRUE(accesses.empty()) << ::testing::PrintToString(accesses);
  EXPECT_FALSE(host_socket.connected()) << "flamebpf connected to the host's socket";
  host.expect_untouched({"host.sock"});
  for (pid_t pid : {planted.pid, socket_link.pid}) {
    auto about_jvm = lines_with(run.log, "JVM " + std::to_string(pid) + " ");
    ASSERT_EQ(about_jvm.size(), 1u) << run.log;
    EXPECT_NE(about_jvm[0].find("cannot load flamebpf's agent"), std::string::npos) << run.log;
  }
  // The links are still links.
  std::string root = "/proc/" + std::to_string(planted.pid) + "/root";
  EXPECT_TRUE(fs::is_symlink(root + "/tmp/" + agent));
  EXPECT_TRUE(fs::is_symlink(root + "/var/tmp"));
}

TEST_F(HostileContainerTest, RealJvmWithAFifoForItsPerfMapKeepsRunningAndGetsAMapOfItsOwn)
{
  std::string java = std::string(kContainerJavaHome) + "/bin/java";
  auto jvm = docker_.run(
      "hj-fifo", {}, docker_.java_image(JavaVersion::kJdk17),
      {java, "-XX:+PreserveFramePointer", "-cp", std::string(kContainerAppDir), "Burner", "30"});
  docker_.wait_for_output("hj-fifo", "burner ready");
  std::string map = "/proc/" + std::to_string(jvm.pid) + "/root/tmp/perf-1.map";
  ASSERT_EQ(::mkfifo(map.c_str(), 0666), 0) << std::strerror(errno);
  auto run = run_measured(
      {"--cgroup", "hj-fifo", "-d", "3", "-o", dir_.path().string() + "/out.folded"}, dir_.path());
  print_figures("real JVM, FIFO perf map", run);
  expect_prompt(run, 3, kAttachTimeoutSeconds);
  auto about_jvm = lines_with(run.log, "JVM " + std::to_string(jvm.pid) + " ");
  ASSERT_EQ(about_jvm.size(), 1u) << run.log;
  EXPECT_NE(about_jvm[0].find("loaded flamebpf's agent"), std::string::npos) << run.log;
  auto stacks = read_folded(dir_.path().string() + "/out.folded");
  EXPECT_GT(count_with_prefix(stacks, "java;"), 50u) << run.log;
  // The JVM neither hangs nor dies: it still answers jcmd-less liveness (its process runs and is
  // not stopped in the agent's open).
  EXPECT_EQ(docker_.docker({"inspect", "-f", "{{.State.Running}}", "hj-fifo"}), "true");
  // The agent never opened the FIFO: it put a map of its own in its place.
  struct stat status {};
  ASSERT_EQ(::lstat(map.c_str(), &status), 0);
  EXPECT_TRUE(S_ISREG(status.st_mode));
}

// --- forged names ---

// Names of frames the spinners' perf maps give their generated code, outermost first; escapes as
// jit_spinner decodes them. None may add, split or drop a frame, or inject markup.
const std::vector<std::string> kHostileFrames{
    "Hostile.outer",
    "semi;colon;frame",
    "</text><script>alert(1)</script><evil/>",
    "fake_[k]",
    "tab\\there\\x0dcr",
    "ctl\\x01\\x1b[31mred",
    "utf8 \\xff\\xfe\\xc0\\x80 bad",
    "ends with a count 12345",
    "Hostile.leaf",
};

// Process names (at most 15 bytes), escaped likewise.
const std::vector<std::string> kHostileComms{
    "semi;colon;x", "nl\\nfake;c 99", "kern_[k]", "</text><script>", "amp&<evil/>\\xff",
};

std::string unescaped(const std::string& text)
{
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == 'n') {
      out += '\n';
      ++i;
    } else if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == 't') {
      out += '\t';
      ++i;
    } else if (text[i] == '\\' && i + 3 < text.size() && text[i + 1] == 'x') {
      out += static_cast<char>(std::stoi(text.substr(i + 2, 2), nullptr, 16));
      i += 3;
    } else {
      out += text[i];
    }
  }
  return out;
}

// Checks folded text of the forged-name processes: it parses, and in every stack through the
// generated code each process name and each frame name is exactly one frame (the hostile frames
// are the last kHostileFrames.size() before any kernel frames, and the process name is at the
// same place in every such stack). Returns the number of samples through the generated code.
uint64_t
expect_names_kept_apart(const std::string& folded, size_t comm_index, const std::string& context)
{
  EXPECT_EQ(folded_problems(folded), "") << context;
  uint64_t through = 0;
  std::set<std::string> comms;
  for (const auto& [stack, count] : parse_folded(folded)) {
    if (stack.find("Hostile.leaf") == std::string::npos)
      continue;
    through += count;
    auto frames = split(stack, ';');
    auto outer = std::find_if(frames.begin(), frames.end(),
                              [](const std::string& f) { return f.starts_with("Hostile.outer"); });
    EXPECT_NE(outer, frames.end()) << stack;
    if (outer == frames.end())
      continue;
    size_t first = static_cast<size_t>(outer - frames.begin());
    EXPECT_GE(frames.size(), first + kHostileFrames.size()) << stack;
    if (frames.size() >= first + kHostileFrames.size()) {
      EXPECT_TRUE(frames[first + kHostileFrames.size() - 1].starts_with("Hostile.leaf")) << stack;
    }
    if (comm_index < frames.size())
      comms.insert(frames[comm_index]);
  }
  // One process name per spinner, each a frame of its own.
  EXPECT_EQ(comms.size(), kHostileComms.size() + 1) << ::testing::PrintToString(comms) << context;
  return through;
}

// What is wrong with an SVG of flamebpf's: not well-formed XML, more <script> elements than
// flamebpf's own (scripts), or an injected <evil> element.
std::string svg_problems(const std::string& path, size_t scripts, const std::string& scratch)
{
  std::string problems;
  auto lint = run_tool({"/usr/bin/xmllint", "--noout", path}, scratch);
  if (lint.first != 0)
    problems += "xmllint: " + lint.second;
  auto evil =
      run_tool({"/usr/bin/xmllint", "--xpath", "count(//*[local-name()='evil'])", path}, scratch);
  if (evil.second.find('0') != 0)
    problems += "injected elements: " + evil.second;
  std::string text = read_text(path);
  if (occurrences(text, "<script") != scripts)
    problems += std::to_string(occurrences(text, "<script")) + " <script elements";
  if (text.find("<evil") != std::string::npos)
    problems += "raw <evil";
  return problems;
}

TEST_F(HostileContainerTest, ForgedProcessFrameAndCgroupNamesCannotBreakTheOutput)
{
  std::vector<std::string> frames_mode{"valid"};
  frames_mode.insert(frames_mode.end(), kHostileFrames.begin(), kHostileFrames.end());
  auto with_comm = [&](const std::string& comm) {
    std::vector<std::string> args{"--comm", comm};
    args.insert(args.end(), frames_mode.begin(), frames_mode.end());
    return args;
  };
  auto names = spin("hn-names", with_comm("plain"));
  for (const auto& comm : kHostileComms) {
    pid_t pid = spin_another(names, unescaped(comm), with_comm(comm));
    ASSERT_GT(pid, 0);
    wait_for_map(pid);
  }

  // A sub-cgroup of another container, named by whoever made it (a runtime, an orchestrator);
  // the kernel refuses newlines in cgroup names (and '/' is the path separator), so it gets the
  // rest, bytes that are not UTF-8 and a terminal escape included.
  auto cg = spin("hn-cgroup", {"--comm", "cgspin", "valid", "Cgroup.leaf"});
  std::string hostile =
      cg.cgroup2_path + "/evil;x\ny_[k] \xff\xfe\x1b[31m<script>&amp;<evil a=\"'\">";
  if (::mkdir(hostile.c_str(), 0755) != 0) {
    ASSERT_EQ(errno, EINVAL) << hostile << ": " << std::strerror(errno);
    hostile = cg.cgroup2_path + "/evil;x y_[k] \xff\xfe\x1b[31m<script>&amp;<evil a=\"'\">";
    ASSERT_EQ(::mkdir(hostile.c_str(), 0755), 0) << std::strerror(errno);
  }
  std::ofstream(hostile + "/cgroup.procs") << cg.pid;
  ASSERT_NE(read_text("/proc/" + std::to_string(cg.pid) + "/cgroup").find("evil;x"),
            std::string::npos);
  std::string hostile_target = hostile.substr(cgroup2_mount().size() + 1);
  // The spinner has run on a CPU in its new cgroup.
  ASSERT_TRUE(wait_until(
      [&] {
        std::string usage = read_text(hostile + "/cpu.stat");
        return usage.starts_with("usage_usec ") && !usage.starts_with("usage_usec 0\n");
      },
      10s, "the spinner to run in " + hostile));

  // Folded on stdout, every stack led by its target's name.
  auto streamed = run_measured(
      {"--cgroup", "hn-names", "--cgroup", hostile_target, "-d", "3", "-o", "-"}, dir_.path());
  print_figures("forged names, folded on stdout", streamed);
  expect_prompt(streamed, 3);
  uint64_t through = expect_names_kept_apart(streamed.out, 1, streamed.log);
  EXPECT_GT(through, 100u) << streamed.log;
  // UTF-8 text, with no control character for the terminal it is printed on.
  EXPECT_TRUE(utf8::is_valid(streamed.out));
  EXPECT_EQ(streamed.out.find('\x1b'), std::string::npos);
  std::set<std::string> targets;
  uint64_t cgroup_samples = 0;
  for (const auto& [stack, count] : parse_folded(streamed.out)) {
    auto frames = split(stack, ';');
    targets.insert(frames[0]);
    if (frames.size() > 1 && frames[1] == "cgspin")
      cgroup_samples += count;
  }
  // Two targets, each one frame; the hostile cgroup's samples under one name.
  EXPECT_EQ(targets.size(), 2u) << ::testing::PrintToString(targets);
  EXPECT_GT(cgroup_samples, 30u) << streamed.out;

  // Agent mode: every format, one directory per target, nothing outside the output directory.
  std::string parent = dir_.path().string() + "/agent";
  fs::create_directories(parent);
  std::string out = parent + "/dumps";
  auto dumped = run_measured({"--cgroup", "hn-names", "--cgroup", hostile_target, "--output-dir",
                              out, "--interval", "2", "-d", "3", "--format", "folded,svg,pprof"},
                             dir_.path());
  print_figures("forged names, agent dumps", dumped);
  expect_prompt(dumped, 3);
  EXPECT_EQ(files_below(parent).count("dumps"), 1u);
  std::set<std::string> top_level;
  for (const auto& entry : fs::directory_iterator(parent))
    top_level.insert(entry.path().filename());
  EXPECT_EQ(top_level, std::set<std::string>{"dumps"});

  std::string go = find_go();
  ASSERT_FALSE(go.empty()) << "go tool pprof is needed: install golang-go";
  size_t scripts = clean_svg_scripts(dir_.path());
  size_t target_dirs = 0;
  std::string names_folded; // every window of hn-names
  for (const auto& entry : fs::directory_iterator(out)) {
    std::string name = entry.path().filename();
    if (name == "flamebpf-stats.jsonl") {
      // JSON lines, so UTF-8, with every control character escaped.
      std::string stats = read_text(entry.path());
      EXPECT_TRUE(utf8::is_valid(stats)) << stats;
      for (const auto& line : split(stats.substr(0, stats.size() - 1), '\n'))
        EXPECT_EQ(
            std::count_if(line.begin(), line.end(), [](char c) { return c >= 0 && c < 0x20; }), 0)
            << line;
      continue;
    }
    ASSERT_TRUE(entry.is_directory()) << name;
    ++target_dirs;
    EXPECT_EQ(name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                     "0123456789._-"),
              std::string::npos)
        << "target directory '" << name << "'";
    for (const auto& file : fs::directory_iterator(entry.path())) {
      std::string path = file.path().string();
      if (file.is_symlink())
        continue; // latest.* -> a dump beside it
      if (path.ends_with(".folded")) {
        std::string text = read_text(path);
        EXPECT_EQ(folded_problems(text), "") << path;
        EXPECT_TRUE(utf8::is_valid(text)) << path;
        if (name == "hn-names")
          names_folded += text;
      } else if (path.ends_with(".svg")) {
        EXPECT_EQ(svg_problems(path, scripts, dir_.path()), "") << path;
      } else if (path.ends_with(".pb.gz")) {
        // pprof's strings are proto3 strings: protobuf's own parser refuses any that is not
        // UTF-8, where go tool pprof lets it through.
        std::string raw = dir_.path().string() + "/profile.pb";
        ASSERT_EQ(run_tool({"/bin/sh", "-c", "gzip -dc '" + path + "' >" + raw}, dir_.path()).first,
                  0);
        perftools::profiles::Profile parsed;
        EXPECT_TRUE(parsed.ParseFromString(read_text(raw))) << path;
        std::string top = PprofTool(go, dir_.path()).run({"-top", "-nodecount=200"}, path);
        if (name == "hn-names") {
          EXPECT_NE(top.find("Hostile.leaf"), std::string::npos) << top;
        }
      } else {
        ADD_FAILURE() << "unexpected file " << path;
      }
    }
  }
  EXPECT_EQ(target_dirs, 2u) << ::testing::PrintToString(files_below(out));
  EXPECT_EQ(dumped.log.find("invalid UTF-8"), std::string::npos) << dumped.log;
  EXPECT_GT(expect_names_kept_apart(names_folded, 0, dumped.log), 50u) << dumped.log;
}

} // namespace
} // namespace flamebpf::testing
