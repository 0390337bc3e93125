// flamebpf's seccomp profile (deploy/seccomp/flamebpf.json), applied by the launcher every
// integration test runs flamebpf with (progs/seccomp_launcher.cpp): as a node applies it, calls
// flamebpf never makes fail with EPERM and one it makes goes through; as the tests apply it, a
// call outside it stops the program and is named. (That the profile lets flamebpf do all it does
// is every other integration test, and the image test under Docker.)
#include <csignal>
#include <gtest/gtest.h>
#include <map>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "harness.h"
#include "process.h"

namespace flamebpf::testing {
namespace {

using namespace std::chrono_literals;

// syscall_probe's answer: each call's errno name ("0" if it succeeded).
std::map<std::string, std::string> answers(const std::string& output)
{
  std::map<std::string, std::string> errors;
  std::istringstream lines(output);
  for (std::string call, error; lines >> call >> error;)
    errors[call] = error;
  return errors;
}

std::vector<std::string> launched(const std::vector<std::string>& options,
                                  const std::vector<std::string>& calls)
{
  std::vector<std::string> argv{SECCOMP_LAUNCHER_BINARY};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), {FLAMEBPF_SECCOMP_PROFILE, SYSCALL_PROBE_BINARY});
  argv.insert(argv.end(), calls.begin(), calls.end());
  return argv;
}

TEST(SeccompProfile, CallsFlamebpfNeverMakesFailWithEpermAndItsOwnGoThrough)
{
  ASSERT_EQ(::geteuid(), 0u) << "root's answers to these calls are the ones to compare";
  const std::vector<std::string> never_made{"mount", "init_module", "kexec_load", "reboot"};
  std::vector<std::string> calls = never_made;
  calls.push_back("bpf");
  std::vector<std::string> unfiltered{SYSCALL_PROBE_BINARY};
  unfiltered.insert(unfiltered.end(), calls.begin(), calls.end());
  auto without = run_process(unfiltered, {}, 10s);
  auto with = run_process(launched({"--mode", "as-written"}, calls), {}, 10s);
  ASSERT_EQ(without.status, 0) << without.err;
  ASSERT_EQ(with.status, 0) << with.err;
  auto native = answers(without.out);
  auto profiled = answers(with.out);

  size_t refused_by_the_profile = 0;
  for (const auto& call : never_made) {
    EXPECT_EQ(profiled[call], "EPERM") << call << " is allowed by " FLAMEBPF_SECCOMP_PROFILE;
    // Root gets another answer without the profile, unless the kernel refuses the call to all.
    refused_by_the_profile += native[call] != "EPERM" && profiled[call] == "EPERM";
  }
  EXPECT_GE(refused_by_the_profile, 3u) << "without the profile:\n" << without.out;
  // bpf goes through to the kernel, which refuses the command that does not exist.
  EXPECT_EQ(native["bpf"], "EINVAL");
  EXPECT_EQ(profiled["bpf"], "EINVAL");
}

TEST(SeccompProfile, ACallOutsideItStopsTheProgramAndIsNamedOrInLearnModeLetThrough)
{
  TempDir dir;
  std::string report = dir.path().string() + "/report";
  auto enforced = run_process(
      launched({"--mode", "enforce", "--report", report}, {"bpf", "init_module", "bpf"}), {}, 10s);
  EXPECT_EQ(enforced.status, 128 + SIGKILL) << enforced.err;
  EXPECT_EQ(enforced.out, "bpf EINVAL\n") << "init_module ran, or what follows it";
  EXPECT_NE(enforced.err.find("called init_module, system call"), std::string::npos)
      << enforced.err;
  EXPECT_NE(enforced.err.find("killed it"), std::string::npos) << enforced.err;
  EXPECT_EQ(read_text(report), enforced.err);

  std::string learned = dir.path().string() + "/learned";
  auto learning = run_process(
      launched({"--mode", "learn", "--report", learned}, {"init_module", "bpf", "init_module"}), {},
      10s);
  EXPECT_EQ(learning.status, 0) << learning.err;
  auto errors = answers(learning.out);
  EXPECT_NE(errors["init_module"], "EPERM") << learning.out;
  EXPECT_EQ(errors["bpf"], "EINVAL") << learning.out;
  EXPECT_EQ(lines_with(learning.err, "called init_module").size(), 1u) << learning.err;
  EXPECT_NE(learning.err.find("let through"), std::string::npos) << learning.err;
  EXPECT_EQ(read_text(learned), learning.err);
}

} // namespace
} // namespace flamebpf::testing
