// Cross-checks flamebpf's native symbolizer against BCC's (bcc_symcache_resolve), an independent,
// well-kept implementation, on the same addresses of the same live process.
#include <bcc/bcc_syms.h>
#include <chrono>
#include <cstdio>
#include <gtest/gtest.h>
#include <string>
#include <thread>
#include <unistd.h>

#include "harness.h"
#include "symbolize/process_table.h"

namespace flamebpf::testing {
namespace {

struct Comparison {
  size_t compared = 0;
  size_t agreed = 0;
  std::vector<std::string> disagreements;
};

// Walks every executable file mapping of pid in steps of stride bytes and compares the function
// name both symbolizers give where both give one.
Comparison compare_symbolizers(pid_t pid, uint64_t stride)
{
  Comparison result;
  symbolize::ProcessTable table;
  // image_id 0: the live process as it is now.
  const auto& image = table.get({static_cast<uint32_t>(pid), 0});
  void* bcc_cache = bcc_symcache_new(pid, nullptr);
  EXPECT_NE(bcc_cache, nullptr);
  for (const auto& code : image.code) {
    if (!code.mapping.file_backed() || !code.symbols)
      continue;
    for (uint64_t address = code.mapping.start; address < code.mapping.end; address += stride) {
      auto ours =
          code.symbols->match_file_offset(address - code.mapping.start + code.mapping.offset);
      bcc_symbol theirs{};
      if (!ours || bcc_symcache_resolve_no_demangle(bcc_cache, address, &theirs) != 0 ||
          !theirs.name)
        continue;
      ++result.compared;
      // Aliases (malloc and __libc_malloc) share a start: the same function, named either way.
      if (ours->name == theirs.name || ours->offset == theirs.offset)
        ++result.agreed;
      else if (result.disagreements.size() < 10)
        result.disagreements.push_back(code.mapping.path + ": ours " + ours->name + "+" +
                                       std::to_string(ours->offset) + ", bcc " + theirs.name + "+" +
                                       std::to_string(theirs.offset));
    }
  }
  bcc_free_symcache(bcc_cache, pid);
  return result;
}

TEST(BccSymbolizerCrossCheck, SameNamesAsBccOnALiveProcess)
{
  ASSERT_EQ(::geteuid(), 0u) << "run as root";
  TempDir dir;
  auto burner = copy_burner(dir.path(), "burner_bcc");
  Child workload({burner, "30"});
  wait_until_busy(workload.pid(), "burner_bcc");

  auto result = compare_symbolizers(workload.pid(), 61);
  std::string examples;
  for (const auto& line : result.disagreements)
    examples += "\n  " + line;
  std::printf("%zu of %zu addresses agree with BCC\n", result.agreed, result.compared);
  // The executable, libc and ld.so give tens of thousands of addresses.
  EXPECT_GT(result.compared, 10000u);
  EXPECT_GE(result.agreed * 1000, result.compared * 995)
      << result.agreed << " of " << result.compared << " agree; e.g." << examples;
}

} // namespace
} // namespace flamebpf::testing
