#include <chrono>
#include <cstdlib>
#include <cxxabi.h>
#include <gtest/gtest.h>
#include <string>

#include "symbolize/demangle.h"
#include "synthetic_elf.h"

namespace flamebpf::symbolize {
namespace {

TEST(Demangle, ItaniumNames)
{
  EXPECT_EQ(demangle("_ZN10fb_fixture7shifted7computeEi"), "fb_fixture::shifted::compute(int)");
  EXPECT_EQ(demangle("_ZNSt6vectorIiSaIiEE9push_backERKi"),
            "std::vector<int, std::allocator<int> >::push_back(int const&)");
  EXPECT_EQ(demangle("_Z1fv"), "f()");
}

TEST(Demangle, OtherNamesUnchanged)
{
  EXPECT_EQ(demangle("main"), "main");
  EXPECT_EQ(demangle("fb_fixture_alpha"), "fb_fixture_alpha");
  EXPECT_EQ(demangle(""), "");
  EXPECT_EQ(demangle("_"), "_");
  EXPECT_EQ(demangle("_Z"), "_Z");
  EXPECT_EQ(demangle("_Zinvalid@@"), "_Zinvalid@@");
  EXPECT_EQ(demangle("_R"), "_R");
  EXPECT_EQ(demangle("_RNvC"), "_RNvC");
  EXPECT_EQ(demangle(std::string_view("_Z1fv\0x", 7)), std::string("_Z1fv\0x", 7));
}

// Rust's names as rustfilt and perf show them: legacy ones without their hash, v0 ones without
// their crates' disambiguators; a C++ name of the same shape is still C++.
TEST(Demangle, RustNamesWithoutTheirHash)
{
  EXPECT_EQ(demangle("_ZN1r4spin17h046ec7fc137bb596E"), "r::spin");
  EXPECT_EQ(demangle("_ZN3std2rt19lang_start_internal17h9cf8da7c8e3b1f0aE"),
            "std::rt::lang_start_internal");
  EXPECT_EQ(demangle("_RNvCs6GmmlP4bgsG_1r4spin"), "r::spin");
  EXPECT_EQ(demangle("_RNvNtCs1234_4core3fmt5write"), "core::fmt::write");
  // Itanium names that merely start as legacy Rust ones do.
  EXPECT_EQ(demangle("_ZN1r4spinEv"), "r::spin()");
  EXPECT_EQ(demangle("_ZN1r4spin17hzzzzzzzzzzzzzzzzE"), "r::spin::hzzzzzzzzzzzzzzzz");
}

// The bounded demangler names things as the C++ runtime's __cxa_demangle does (Rust's legacy names,
// which it reads as C++ with their hash, aside).
TEST(Demangle, SameNamesAsTheCxxRuntime)
{
  for (const char* mangled :
       {"_ZNKSt8_Rb_treeIiSt4pairIKiiESt10_Select1stIS2_ESt4lessIiESaIS2_EE4findERS1_",
        "_ZN5boost6detail17sp_counted_impl_pIN3foo4implEE7disposeEv", "_ZZ4mainENKUlvE_clEv",
        "_ZN3foo3barIJicdEEEvDpT_", "_ZThn8_N1B1fEv", "_ZdlPv",
        "_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEED1Ev"}) {
    int status = 0;
    char* expected = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
    ASSERT_EQ(status, 0) << mangled;
    EXPECT_EQ(demangle(mangled), expected);
    std::free(expected);
  }
}

TEST(Demangle, ExponentialNameIsCutAtTheBudget)
{
  std::string mangled = flamebpf::testing::exponential_mangled_name();
  ASSERT_EQ(mangled.size(), 234u);
  auto started = std::chrono::steady_clock::now();
  auto demangled = demangle_bounded(mangled);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_TRUE(demangled.cut);
  EXPECT_EQ(demangled.text.size(), kMaxDemangledBytes);
  EXPECT_TRUE(demangled.text.starts_with("f(X, A<X, X>, A<A<X, X>, A<X, X> >"));
  EXPECT_TRUE(demangled.text.ends_with(kTruncated));
  EXPECT_LT(seconds, 0.5);
}

TEST(Demangle, BudgetIsTheCallersToChoose)
{
  auto demangled = demangle_bounded("_ZNSt6vectorIiSaIiEE9push_backERKi", 27);
  EXPECT_TRUE(demangled.cut);
  EXPECT_EQ(demangled.text, "std::vector<int,[truncated]");
  // Exactly the budget fits; one byte less does not.
  auto whole = demangle_bounded("_ZN10fb_fixture7shifted7computeEi", 33);
  EXPECT_FALSE(whole.cut);
  EXPECT_EQ(whole.text, "fb_fixture::shifted::compute(int)");
  auto over = demangle_bounded("_ZN10fb_fixture7shifted7computeEi", 32);
  EXPECT_TRUE(over.cut);
  EXPECT_EQ(over.text, "fb_fixture::shifted::[truncated]");
}

// Rust's v0 demangler holds a block on the heap while it prints a Punycode identifier: a name
// with one is cut at its budget without leaving the demangler midway (the sanitized run's leak
// check would see the block), and one that may also expand through back-references is kept as it
// is (a fuzzer's input).
TEST(Demangle, RustPunycodeNamesAreCutWithoutLeaking)
{
  EXPECT_EQ(demangle("_RNvCu8gdel_5qa4main"), "g\u00f6del::main");
  // Cut inside the identifier (of 24 bytes), where the block is held.
  auto cut = demangle_bounded("_RNvCu23gdelgdelgdelgdel_mwbeee4main", kTruncated.size() + 2);
  EXPECT_TRUE(cut.cut);
  EXPECT_EQ(cut.text, "g" + std::string(kTruncated));
  EXPECT_EQ(demangle("_RINvNyCu4corm3ptr1TTINvC05TTTTTtB_"), "_RINvNyCu4corm3ptr1TTINvC05TTTTTtB_");
  // A binder of more lifetimes than there are atoms (a fuzzer's input; it ran for good).
  std::string binder = "_RINvNtCs1234_4coru3ptr1FFFFFFFFGin" + std::string(30, 'Z') + "_";
  EXPECT_EQ(demangle(binder), binder);
}

TEST(Demangle, LongNamesAreCutNotDemangled)
{
  std::string plain(kMaxDemangledBytes + 10, 'p');
  auto cut = demangle_bounded(plain);
  EXPECT_TRUE(cut.cut);
  EXPECT_EQ(cut.text,
            std::string(kMaxDemangledBytes - kTruncated.size(), 'p') + std::string(kTruncated));
  // Past kMaxMangledBytes a mangled name is not demangled: the demangler's stack use grows with it.
  std::string mangled = "_Z1f" + std::string(kMaxMangledBytes, 'i');
  auto as_read = demangle_bounded(mangled, 2 * kMaxMangledBytes);
  EXPECT_FALSE(as_read.cut);
  EXPECT_EQ(as_read.text, mangled);
}

} // namespace
} // namespace flamebpf::symbolize
