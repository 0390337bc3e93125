#include <cerrno>
#include <fstream>
#include <gtest/gtest.h>
#include <iterator>
#include <string>
#include <sys/resource.h>

#include "symbolize/xz.h"
#include "test_support.h"

namespace flamebpf::symbolize {
namespace {

std::string fixture(const std::string& name)
{
  std::string path = std::string(FLAMEBPF_ELF_DEBUG_FIXTURES) + "/xz/" + name;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

constexpr size_t kOutput = 32 << 20;
constexpr uint64_t kMemory = 24 << 20;

TEST(Xz, DecompressesWhatFitsTheBudgets)
{
  std::string library = [] {
    std::ifstream in(FLAMEBPF_ELF_FIXTURE_PLAIN, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  auto output = xz_decompress(fixture("small.xz"), kOutput, kMemory);
  ASSERT_TRUE(output.has_value()) << output.error().message;
  EXPECT_EQ(*output, library);
  // Exactly the budget is within it; one byte less is not.
  EXPECT_TRUE(xz_decompress(fixture("small.xz"), library.size(), kMemory).has_value());
  EXPECT_FALSE(xz_decompress(fixture("small.xz"), library.size() - 1, kMemory).has_value());
}

TEST(Xz, BombStopsAtTheOutputBudget)
{
  rusage before{};
  ::getrusage(RUSAGE_SELF, &before);
  // 20 KB that expand to 64 MiB, and say so in their index: refused before decoding.
  auto output = xz_decompress(fixture("bomb.xz"), 1 << 20, kMemory);
  rusage after{};
  ::getrusage(RUSAGE_SELF, &after);
  ASSERT_FALSE(output.has_value());
  EXPECT_EQ(output.error().errno_value, EFBIG);
  EXPECT_EQ(output.error().message, "cannot decompress: more than 1048576 bytes");
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 16 * 1024);
}

// Without an index to read the size from (here: padding after the stream hides it), the stream is
// decoded once to count its bytes, up to the budget, and nothing is held.
TEST(Xz, BombWithoutAReadableIndexStopsAtTheOutputBudgetToo)
{
  rusage before{};
  ::getrusage(RUSAGE_SELF, &before);
  auto output = xz_decompress(fixture("bomb.xz") + std::string(4, '\0'), 4 << 20, kMemory);
  rusage after{};
  ::getrusage(RUSAGE_SELF, &after);
  ASSERT_FALSE(output.has_value());
  EXPECT_EQ(output.error().errno_value, EFBIG);
  EXPECT_EQ(output.error().message, "cannot decompress: more than 4194304 bytes");
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 16 * 1024); // the decoder's dictionary at most
  // The padded small stream still decompresses.
  EXPECT_TRUE(xz_decompress(fixture("small.xz") + std::string(4, '\0'), kOutput, kMemory));
}

TEST(Xz, DictionaryLargerThanTheMemoryBudgetIsRefused)
{
  auto output = xz_decompress(fixture("bigdict.xz"), kOutput, kMemory);
  ASSERT_FALSE(output.has_value());
  EXPECT_EQ(output.error().message,
            "cannot decompress: its decoder needs more memory than allowed");
}

TEST(Xz, GarbageAndTruncatedDataAreErrors)
{
  EXPECT_FALSE(xz_decompress(fixture("garbage.xz"), kOutput, kMemory).has_value());
  std::string small = fixture("small.xz");
  auto truncated = xz_decompress(small.substr(0, small.size() / 2), kOutput, kMemory);
  ASSERT_FALSE(truncated.has_value());
  EXPECT_EQ(truncated.error().message, "cannot decompress: corrupt or truncated xz data");
  EXPECT_FALSE(xz_decompress("", kOutput, kMemory).has_value());
}

} // namespace
} // namespace flamebpf::symbolize
