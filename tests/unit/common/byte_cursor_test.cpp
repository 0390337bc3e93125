#include <gtest/gtest.h>
#include <optional>
#include <string>

#include "common/byte_cursor.h"

namespace flamebpf {
namespace {

ByteCursor of(const std::string& bytes)
{
  static std::string held;
  held = bytes;
  return ByteCursor(held);
}

TEST(ByteCursor, FixedNumbersAreLittleEndian)
{
  std::string bytes("\x01\x02\x03\x04\x05\x06\x07\x08\x09", 9);
  ByteCursor cursor(bytes);
  EXPECT_EQ(cursor.fixed<uint16_t>(), 0x0201u);
  EXPECT_EQ(cursor.fixed(3), 0x050403u);
  EXPECT_EQ(cursor.fixed(4), 0x09080706u);
  EXPECT_TRUE(cursor.ok());
  EXPECT_TRUE(cursor.at_end());
  EXPECT_EQ(cursor.byte(), 0u);
  EXPECT_FALSE(cursor.ok());
}

TEST(ByteCursor, AFailedReadFailsEveryLaterOne)
{
  std::string bytes("\x01\x02\x03", 3);
  ByteCursor cursor(bytes, 0, 2);
  EXPECT_EQ(cursor.fixed<uint32_t>(), 0u);
  EXPECT_FALSE(cursor.ok());
  EXPECT_EQ(cursor.byte(), 0u);
  EXPECT_EQ(cursor.block(1), "");
  EXPECT_EQ(cursor.fixed(9), 0u);
  ByteCursor past(bytes, 4);
  EXPECT_FALSE(past.ok());
  ByteCursor wide(bytes);
  EXPECT_EQ(wide.fixed(9), 0u); // no number is 9 bytes wide
  EXPECT_FALSE(wide.ok());
}

TEST(ByteCursor, Leb128AtTheLimitsOf64Bits)
{
  auto uleb = [](const std::string& bytes) {
    auto cursor = of(bytes);
    uint64_t value = cursor.uleb();
    return cursor.ok() ? std::optional<uint64_t>(value) : std::nullopt;
  };
  auto sleb = [](const std::string& bytes) {
    auto cursor = of(bytes);
    int64_t value = cursor.sleb();
    return cursor.ok() ? std::optional<int64_t>(value) : std::nullopt;
  };
  EXPECT_EQ(uleb("\xe5\x8e\x26"), 624485u);
  EXPECT_EQ(uleb("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"), UINT64_MAX);
  EXPECT_EQ(uleb("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02"), std::nullopt); // bit 64
  EXPECT_EQ(uleb("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x81\x01"), std::nullopt);
  // Padding that says nothing past bit 63 is a number still, however long.
  EXPECT_EQ(uleb(std::string("\x85\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x00", 12)), 5u);
  EXPECT_EQ(uleb("\x80\x80"), std::nullopt); // runs out
  EXPECT_EQ(sleb("\xc0\xbb\x78"), -123456);
  EXPECT_EQ(sleb("\x80\x80\x80\x80\x80\x80\x80\x80\x80\x7f"), INT64_MIN);
  EXPECT_EQ(sleb(std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x00", 10)), INT64_MAX);
  EXPECT_EQ(sleb("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"), std::nullopt); // sign not repeated
  EXPECT_EQ(sleb("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f"), -1);
  EXPECT_EQ(sleb("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x3f"), std::nullopt);
}

TEST(ByteCursor, StringsNeedTheirNulBeforeTheEnd)
{
  std::string bytes("ab\0cd", 5);
  ByteCursor cursor(bytes);
  EXPECT_EQ(cursor.string(), "ab");
  EXPECT_EQ(cursor.string(), "");
  EXPECT_FALSE(cursor.ok());
  ByteCursor bounded(bytes, 0, 2);
  EXPECT_EQ(bounded.string(), "");
  EXPECT_FALSE(bounded.ok());
}

} // namespace
} // namespace flamebpf
