#include <gtest/gtest.h>
#include <set>

#include "symbolize/late_names.h"

namespace flamebpf::symbolize {
namespace {

TEST(LateFrames, OneNumberAnAddressOfAnImage)
{
  LateFrames frames;
  uint32_t first = frames.note({10, 1}, 0x1000);
  EXPECT_NE(first, 0u);
  EXPECT_EQ(frames.note({10, 1}, 0x1000), first) << "every stack holding it shares it";
  EXPECT_NE(frames.note({10, 1}, 0x1001), first);
  EXPECT_NE(frames.note({10, 2}, 0x1000), first) << "another image of the pid, after an exec";
  EXPECT_NE(frames.note({11, 1}, 0x1000), first);
  EXPECT_EQ(frames.size(), 4u);
  const LateFrames::Entry* entry = frames.find(first);
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->image, (ImageKey{10, 1}));
  EXPECT_EQ(entry->address, 0x1000u);
  EXPECT_EQ(frames.find(0), nullptr);
}

TEST(LateFrames, ForgottenNumbersAreNeverGivenAgain)
{
  LateFrames frames;
  std::set<uint32_t> given;
  for (uint64_t address = 0; address < 10; ++address)
    given.insert(frames.note({1, 1}, address));
  frames.clear();
  EXPECT_EQ(frames.size(), 0u);
  for (uint32_t number : given)
    EXPECT_EQ(frames.find(number), nullptr);
  for (uint64_t address = 0; address < 10; ++address)
    EXPECT_FALSE(given.contains(frames.note({1, 1}, address))) << "a profile may hold the old";
}

TEST(LateFrames, HoldsABoundedNumberThenNamesNoMore)
{
  LateFrames frames;
  for (uint64_t address = 0; address < LateFrames::kMaxFrames; ++address)
    ASSERT_NE(frames.note({1, 1}, address), 0u);
  EXPECT_EQ(frames.note({1, 1}, LateFrames::kMaxFrames), 0u) << "0: the frame is final";
  EXPECT_NE(frames.note({1, 1}, 5), 0u) << "one held keeps its number";
  EXPECT_EQ(frames.size(), LateFrames::kMaxFrames);
}

} // namespace
} // namespace flamebpf::symbolize
