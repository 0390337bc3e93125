// The lines of /tmp/flamebpf-<pid>.unwind, where the agent tells flamebpf how to unwind the code
// its JVM generates and how to name the methods that interpreter frames hold. Text, one record a
// line, appended as the JVM generates and frees code; numbers are hex unless said otherwise:
//   flamebpf-unwind 1                                the first line: the format's version
//   code <start> <size> <frame words, decimal> <frame complete, decimal bytes from start; -1: none>
//        <prologue: push|save|none> <first end> <second end>
//                                                    a compiled method or stub: prologue.h says
//                                                    what the two ends are (0 with none)
//   interpreter <start> <size>                       the template interpreter's code
//   unload <start>                                   the code at start is gone
//   method <Method*> <name>                          an interpreted frame holding this Method*
//                                                    is named "org.example.Foo.bar"
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "prologue.h"

namespace flamebpf::agent {

inline constexpr std::string_view kUnwindRecordsHeader = "flamebpf-unwind 1\n";

std::string code_record(uint64_t start,
                        uint64_t size,
                        uint32_t frame_words,
                        int32_t frame_complete,
                        const Prologue& prologue);
std::string interpreter_record(uint64_t start, uint64_t size);
std::string unload_record(uint64_t start);
// name must not hold a newline (method_name.h's names never do).
std::string method_record(uint64_t method, std::string_view name);

} // namespace flamebpf::agent
