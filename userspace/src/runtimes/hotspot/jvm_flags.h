// JVM settings that decide what flamebpf can do with a JVM, read from `jcmd VM.flags` or from its
// command line and environment:
// - frame pointers in JIT-compiled code (-XX:+PreserveFramePointer): without them the kernel's
//   unwinder stops at the first Java frame, and Java stacks are cut short;
// - reduced signal use (-Xrs): HotSpot then never handles SIGQUIT, with which an attach begins.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace flamebpf::hotspot {

// The setting in `jcmd VM.flags` output; nullopt if the output does not mention it, which means
// the default (off on x86_64 and arm64).
std::optional<bool> frame_pointers_in_vm_flags(std::string_view vm_flags);

// The setting a JVM got from its command line (NUL-separated /proc/<pid>/cmdline) and
// environment (NUL-separated /proc/<pid>/environ), with the JVM's precedence:
// JAVA_TOOL_OPTIONS, then the command line (JDK_JAVA_OPTIONS is part of it), then _JAVA_OPTIONS;
// the last mention wins. nullopt if none mentions it.
std::optional<bool> frame_pointers_in_command_line(std::string_view cmdline,
                                                   std::string_view environ);

// Whether the JVM runs with -Xrs (or -XX:+ReduceSignalUsage), from the same sources with the
// same precedence.
bool reduced_signals_in_command_line(std::string_view cmdline, std::string_view environ);

// The flags, for messages.
inline constexpr std::string_view kFramePointerFlag = "-XX:+PreserveFramePointer";
inline constexpr std::string_view kReducedSignalsFlag = "-Xrs";

} // namespace flamebpf::hotspot
