// Reading a JVM's code cache from outside it, against a library named libjvm.so whose VMStructs
// tables and code heap are forged (tests/data/jvm/forged_libjvm.c), loaded into this process and
// read through process_vm_readv as flamebpf reads a JVM: what it may cost and what comes out.
#include <chrono>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <string>
#include <unistd.h>

#include "common/procfs.h"
#include "common/utf8.h"
#include "runtimes/hotspot/hotspot_code.h"

namespace flamebpf::hotspot {
namespace {

class ForgedJvm : public ::testing::Test {
protected:
  void SetUp() override
  {
    // RTLD_LOCAL and a fresh load per test: each test forges its own state.
    library_ = ::dlopen(FLAMEBPF_FORGED_LIBJVM, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(library_, nullptr) << ::dlerror();
    forge_ = reinterpret_cast<void (*)(int)>(::dlsym(library_, "forge"));
    code_address_ = reinterpret_cast<uintptr_t (*)()>(::dlsym(library_, "code_address"));
    ASSERT_TRUE(forge_ && code_address_);
  }
  void TearDown() override
  {
    if (library_)
      ::dlclose(library_);
  }

  // Opens the forged JVM as flamebpf opens one: through this process's executable mapping of it.
  Result<std::unique_ptr<HotSpotCode>> open()
  {
    auto maps = procfs::read_file("/proc/self/maps", 16 << 20);
    if (!maps)
      return fail(maps.error());
    for (const auto& mapping : procfs::parse_proc_maps(*maps)) {
      if (mapping.executable && mapping.path == FLAMEBPF_FORGED_LIBJVM)
        return HotSpotCode::open(static_cast<uint32_t>(::getpid()), "/proc", mapping);
    }
    return fail(error("the forged libjvm is not mapped"));
  }

  void* library_ = nullptr;
  void (*forge_)(int) = nullptr;
  uintptr_t (*code_address_)() = nullptr;
};

TEST_F(ForgedJvm, NamesAreCutAndMadeValidText)
{
  forge_(0);
  auto code = open();
  ASSERT_TRUE(code.has_value()) << (code ? "" : code.error().message);
  auto entry = (*code)->find(code_address_());
  ASSERT_TRUE(entry.has_value());
  EXPECT_LE(entry->start, code_address_());
  EXPECT_GT(entry->end, code_address_());
  // The class name's newline became a space and its invalid bytes were replaced; the method's
  // 65,535 bytes were cut to the budget.
  EXPECT_EQ(entry->name.find('\n'), std::string::npos);
  EXPECT_TRUE(utf8::is_valid(entry->name)) << entry->name.substr(0, 80);
  EXPECT_TRUE(entry->name.starts_with("evil class")) << entry->name.substr(0, 80);
  EXPECT_LE(entry->name.size(), 2 * HotSpotCode::kMaxNameBytes + 100);
  EXPECT_NE(entry->name.find(std::string(100, 'm')), std::string::npos);
  // Outside the code heap: nothing.
  EXPECT_FALSE((*code)->find(code_address_() + (64 << 20)).has_value());
}

TEST_F(ForgedJvm, EndlessSegmentMapCostsOneIntervalsBudgetAtMost)
{
  forge_(1);
  auto code = open();
  ASSERT_TRUE(code.has_value()) << (code ? "" : code.error().message);
  // Each lookup hops back towards the heap's start, one segment a read, and finds no blob; a few
  // of them spend the interval's budget.
  auto started = std::chrono::steady_clock::now();
  for (uint64_t i = 1; i <= 5; ++i)
    EXPECT_FALSE((*code)->find(code_address_() + i * 200000).has_value());
  std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
  EXPECT_TRUE((*code)->budget_spent());
  // Spent, the budget refuses at once until the next interval.
  EXPECT_FALSE((*code)->find(code_address_()).has_value());
  (*code)->begin_interval();
  EXPECT_FALSE((*code)->budget_spent());
  std::printf("[ FIGURES  ] a segment map of endless hops: an interval's budget spent in %.3f s\n",
              took.count());
}

TEST_F(ForgedJvm, EndlessTableIsReadWithinItsBudget)
{
  forge_(2);
  auto started = std::chrono::steady_clock::now();
  auto code = open();
  std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
  // Its entries repeat the first three fields until the budget ends the read: no reader, and one
  // reason.
  ASSERT_FALSE(code.has_value());
  EXPECT_NE(code.error().message.find("VMStructs tables take more than"), std::string::npos)
      << code.error().message;
  std::printf("[ FIGURES  ] a table of 200,000 fields: refused after %.3f s\n", took.count());
}

TEST_F(ForgedJvm, ProcessWithoutTheTablesIsRefusedInOneLine)
{
  procfs::Mapping mapping;
  mapping.start = 0x1000;
  mapping.end = 0x2000;
  mapping.executable = true;
  mapping.inode = 1;
  mapping.path = "/nonexistent/libjvm.so";
  auto code = HotSpotCode::open(static_cast<uint32_t>(::getpid()), "/proc", mapping);
  ASSERT_FALSE(code.has_value());
  EXPECT_EQ(code.error().message.find('\n'), std::string::npos);
}

} // namespace
} // namespace flamebpf::hotspot
