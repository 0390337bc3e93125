#include <gtest/gtest.h>

#include "method_name.h"

namespace flamebpf::agent {
namespace {

TEST(TypeName, PrimitivesArraysAndClasses)
{
  EXPECT_EQ(type_name("J"), "long");
  EXPECT_EQ(type_name("Z"), "boolean");
  EXPECT_EQ(type_name("[I"), "int[]");
  EXPECT_EQ(type_name("[[Ljava/lang/String;"), "java.lang.String[][]");
  EXPECT_EQ(type_name("Lorg/example/Foo;"), "org.example.Foo");
  EXPECT_EQ(type_name("Lorg/example/Outer$Inner;"), "org.example.Outer$Inner");
  EXPECT_EQ(type_name("Lorg/example/Foo"), "org.example.Foo"); // no ';': what could be read
  EXPECT_EQ(type_name(""), "?");
  EXPECT_EQ(type_name("Q"), "?");
}

TEST(TypeName, HiddenClassesKeepTheirSuffixAsTheJvmPrintsIt)
{
  EXPECT_EQ(type_name("LHot$$Lambda$1/0x00007f22a8000a08;"), "Hot$$Lambda$1/0x00007f22a8000a08");
  EXPECT_EQ(type_name("Lorg/example/App$$Lambda/0x0000000035040210;"),
            "org.example.App$$Lambda/0x0000000035040210");
  // JVMTI's own spelling, and the class-file one.
  EXPECT_EQ(type_name("LHot$$Lambda$1.0x00007f1efc000a08;"), "Hot$$Lambda$1/0x00007f1efc000a08");
  EXPECT_EQ(type_name("Lp/Foo+0x1234;"), "p.Foo/0x1234");
  // Not a hidden-class suffix: an ordinary package named like one.
  EXPECT_EQ(type_name("Lorg/0xzz/Foo;"), "org.0xzz.Foo");
  EXPECT_EQ(type_name("Lorg/0x12/Foo;"), "org.0x12.Foo");
}

TEST(ParameterList, Descriptors)
{
  EXPECT_EQ(parameter_list("()V"), "");
  EXPECT_EQ(parameter_list("(JLjava/lang/String;[I)V"), "long, java.lang.String, int[]");
  EXPECT_EQ(parameter_list("([[DZ)Ljava/lang/Object;"), "double[][], boolean");
  EXPECT_EQ(parameter_list("(Ljava/lang/Str"), "java.lang.Str");
  EXPECT_EQ(parameter_list("J"), "");
}

TEST(MethodDisplayName, ClassMethodAndParameters)
{
  EXPECT_EQ(method_display_name("Lorg/example/Foo;", "bar", "(JI)J"),
            "org.example.Foo.bar(long, int)");
  EXPECT_EQ(method_display_name("Lorg/example/Outer$Inner;", "<init>", "()V"),
            "org.example.Outer$Inner.<init>()");
  EXPECT_EQ(method_display_name("LApp;", "lambda$main$0", "(Ljava/util/List;)V"),
            "App.lambda$main$0(java.util.List)");
}

TEST(StandardUtf8, ModifiedUtf8IsConverted)
{
  // "é" (U+00E9) is the same in both; NUL is C0 80 in modified UTF-8.
  EXPECT_EQ(standard_utf8("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(standard_utf8(std::string_view("a\xC0\x80"
                                           "b",
                                           4)),
            "a\\0b");
  // U+1F600 as a surrogate pair (ED A0 BD, ED B8 80) becomes one 4-byte sequence.
  EXPECT_EQ(standard_utf8("\xED\xA0\xBD\xED\xB8\x80"), "\xF0\x9F\x98\x80");
  // Line breaks would split a perf-map line.
  EXPECT_EQ(standard_utf8("a\nb\rc"), "a b c");
  // A stray continuation byte is replaced, not copied.
  EXPECT_EQ(standard_utf8("x\x80y"), "x\xEF\xBF\xBDy");
}

TEST(MethodDisplayName, UnicodeNames)
{
  EXPECT_EQ(
      method_display_name("Lcom/exa\xC3\xB1o/\xE6\x97\xA5\xE6\x9C\xAC;", "m\xC3\xA9thode", "()V"),
      "com.exa\xC3\xB1o.\xE6\x97\xA5\xE6\x9C\xAC.m\xC3\xA9thode()");
}

} // namespace
} // namespace flamebpf::agent
