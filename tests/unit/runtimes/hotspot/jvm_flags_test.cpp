#include <gtest/gtest.h>

#include "runtimes/hotspot/jvm_flags.h"

namespace flamebpf::hotspot {
namespace {

std::string nul_joined(std::initializer_list<std::string> words)
{
  std::string joined;
  for (const auto& word : words) {
    joined += word;
    joined.push_back('\0');
  }
  return joined;
}

// /proc/<pid>/cmdline of `java <options> -cp /app Service`.
std::string java(std::initializer_list<std::string> options)
{
  std::string cmdline = nul_joined({"java"});
  for (const auto& option : options)
    cmdline += option + '\0';
  return cmdline + nul_joined({"-cp", "/app", "Service"});
}

TEST(FramePointers, VmFlagsOutput)
{
  EXPECT_EQ(frame_pointers_in_vm_flags("-XX:CICompilerCount=2 -XX:+PreserveFramePointer "
                                       "-XX:+UseSerialGC\n"),
            true);
  EXPECT_EQ(frame_pointers_in_vm_flags("-XX:-PreserveFramePointer -XX:+UseG1GC\n"), false);
  EXPECT_EQ(frame_pointers_in_vm_flags("-XX:+UseG1GC\n"), std::nullopt);
  // A flag whose name merely contains it does not count.
  EXPECT_EQ(frame_pointers_in_vm_flags("-XX:+PreserveFramePointerX"), std::nullopt);
}

TEST(FramePointers, CommandLineAndEnvironmentInTheJvmsOrder)
{
  EXPECT_EQ(frame_pointers_in_command_line(java({"-XX:+PreserveFramePointer"}), ""), true);
  EXPECT_EQ(frame_pointers_in_command_line(java({}), ""), std::nullopt);
  EXPECT_EQ(frame_pointers_in_command_line(
                java({}),
                nul_joined({"PATH=/bin", "JAVA_TOOL_OPTIONS=-Xmx1g -XX:+PreserveFramePointer"})),
            true);
  // The command line overrides JAVA_TOOL_OPTIONS; _JAVA_OPTIONS overrides both.
  EXPECT_EQ(
      frame_pointers_in_command_line(java({"-XX:-PreserveFramePointer"}),
                                     nul_joined({"JAVA_TOOL_OPTIONS=-XX:+PreserveFramePointer"})),
      false);
  EXPECT_EQ(frame_pointers_in_command_line(java({"-XX:-PreserveFramePointer"}),
                                           nul_joined({"_JAVA_OPTIONS=-XX:+PreserveFramePointer"})),
            true);
  // Only the variable itself, not one whose name ends the same.
  EXPECT_EQ(frame_pointers_in_command_line(
                java({}), nul_joined({"MY_JAVA_TOOL_OPTIONS=-XX:+PreserveFramePointer"})),
            std::nullopt);
}

TEST(ReducedSignals, CommandLineAndEnvironmentInTheJvmsOrder)
{
  EXPECT_TRUE(reduced_signals_in_command_line(java({"-Xrs"}), ""));
  EXPECT_TRUE(reduced_signals_in_command_line(java({"-XX:+ReduceSignalUsage"}), ""));
  EXPECT_FALSE(reduced_signals_in_command_line(java({}), ""));
  EXPECT_TRUE(reduced_signals_in_command_line(java({}), nul_joined({"JAVA_TOOL_OPTIONS=-Xrs"})));
  // The last mention wins, with the command line after JAVA_TOOL_OPTIONS.
  EXPECT_FALSE(reduced_signals_in_command_line(java({"-XX:-ReduceSignalUsage"}),
                                               nul_joined({"JAVA_TOOL_OPTIONS=-Xrs"})));
  EXPECT_TRUE(reduced_signals_in_command_line(java({"-XX:-ReduceSignalUsage"}),
                                              nul_joined({"_JAVA_OPTIONS=-Xrs -Xmx1g"})));
  // Other -X options that begin the same do not count.
  EXPECT_FALSE(reduced_signals_in_command_line(java({"-Xrsx", "-Xss1m"}), ""));
}

} // namespace
} // namespace flamebpf::hotspot
