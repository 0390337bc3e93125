// Names of Java methods as flamebpf's perf maps carry them: "org.example.Foo.bar(long, int[])".
// Pure string functions over what JVMTI returns, kept apart from agent.cpp so they are testable
// without a JVM.
#pragma once

#include <string>
#include <string_view>

namespace flamebpf::agent {

// JVMTI returns strings in modified UTF-8: NUL as C0 80 and characters beyond the BMP as two
// 3-byte surrogates. Returns standard UTF-8; a NUL becomes "\0" spelled out, and line breaks
// become spaces, because a perf map holds one entry per line.
std::string standard_utf8(std::string_view modified);

// The Java name of a type descriptor: "Lorg/example/Foo;" is "org.example.Foo", "[I" is "int[]",
// "J" is "long". Hidden classes keep their suffix ("Foo$$Lambda+0x…" as the JVM spells it).
std::string type_name(std::string_view descriptor);

// The parameter types of a method descriptor: "(JLjava/lang/String;[I)V" gives
// "long, java.lang.String, int[]". A malformed descriptor gives what could be read.
std::string parameter_list(std::string_view method_descriptor);

// "org.example.Foo.bar(long, int[])" from the class signature, method name and descriptor.
std::string method_display_name(std::string_view class_signature,
                                std::string_view method_name,
                                std::string_view method_descriptor);

// Joins the names of a method and the methods inlined into it, outermost first, as readers of
// flamebpf's maps split them again: "A.run()->B.work(long)".
inline constexpr std::string_view kInlineSeparator = "->";

} // namespace flamebpf::agent
