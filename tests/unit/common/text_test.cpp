#include <cstdint>
#include <gtest/gtest.h>
#include <string>
#include <string_view>
#include <vector>

#include "common/text.h"

namespace flamebpf::text {
namespace {

using Views = std::vector<std::string_view>;

Views all_lines(std::string_view text)
{
  Views out;
  for (std::string_view line : lines(text))
    out.push_back(line);
  return out;
}

TEST(ParseNumber, TheWholeTextOrNothing)
{
  EXPECT_EQ(parse_number<uint32_t>("4242"), 4242u);
  EXPECT_EQ(parse_number<uint32_t>("0"), 0u);
  EXPECT_EQ(parse_number<uint32_t>(""), std::nullopt);
  EXPECT_EQ(parse_number<uint32_t>("42x"), std::nullopt);
  EXPECT_EQ(parse_number<uint32_t>(" 42"), std::nullopt);
  EXPECT_EQ(parse_number<uint32_t>("42 "), std::nullopt);
  EXPECT_EQ(parse_number<uint32_t>("+42"), std::nullopt);
  EXPECT_EQ(parse_number<uint32_t>("-1"), std::nullopt);
  EXPECT_EQ(parse_number<int>("-1"), -1);
}

TEST(ParseNumber, RangeOfTheType)
{
  EXPECT_EQ(parse_number<uint32_t>("4294967295"), 4294967295u);
  EXPECT_EQ(parse_number<uint32_t>("4294967296"), std::nullopt);
  EXPECT_EQ(parse_number<uint64_t>("4294967296"), 4294967296u);
  EXPECT_EQ(parse_number<uint64_t>("18446744073709551616"), std::nullopt);
  EXPECT_EQ(parse_number<int>("2147483648"), std::nullopt);
}

TEST(ParseNumber, Hexadecimal)
{
  EXPECT_EQ(parse_number<uint64_t>("ffffffffc0a01000", 16), 0xffffffffc0a01000u);
  EXPECT_EQ(parse_number<uint64_t>("7F1C", 16), 0x7f1cu);
  EXPECT_EQ(parse_number<uint64_t>("0x7f1c", 16), std::nullopt);
  EXPECT_EQ(parse_number<uint64_t>("7f1g", 16), std::nullopt);
}

TEST(TakeNumber, AdvancesPastTheDigitsOnly)
{
  std::string_view text = "123 rest";
  EXPECT_EQ(take_number<uint32_t>(text), 123u);
  EXPECT_EQ(text, " rest");
  EXPECT_EQ(take_number<uint32_t>(text), std::nullopt);
  EXPECT_EQ(text, " rest");
  std::string_view hex = "7f-8";
  EXPECT_EQ(take_number<uint64_t>(hex, 16), 0x7fu);
  EXPECT_EQ(hex, "-8");
  std::string_view too_big = "99999999999";
  EXPECT_EQ(take_number<uint32_t>(too_big), std::nullopt);
  EXPECT_EQ(too_big, "99999999999");
}

TEST(SplitFields, RunsOfBlanksSeparateAndNoFieldIsEmpty)
{
  EXPECT_EQ(split_fields(" a\t b  c\t"), (Views{"a", "b", "c"}));
  EXPECT_EQ(split_fields("1000\t1000\t1000\t1000"), (Views{"1000", "1000", "1000", "1000"}));
  EXPECT_EQ(split_fields(""), Views{});
  EXPECT_EQ(split_fields(" \t "), Views{});
  EXPECT_EQ(split_fields("one"), Views{"one"});
}

TEST(SplitFields, OtherSeparators)
{
  EXPECT_EQ(split_fields("/docker//id/", "/"), (Views{"docker", "id"}));
  EXPECT_EQ(split_fields("a b\tc", " "), (Views{"a", "b\tc"}));
}

TEST(Lines, LastLineWithOrWithoutNewline)
{
  EXPECT_EQ(all_lines("a\nb"), (Views{"a", "b"}));
  EXPECT_EQ(all_lines("a\nb\n"), (Views{"a", "b"}));
  EXPECT_EQ(all_lines(""), Views{});
  EXPECT_EQ(all_lines("\n"), Views{""});
  EXPECT_EQ(all_lines("a\n\nb"), (Views{"a", "", "b"}));
  EXPECT_EQ(all_lines("a\r\n"), Views{"a\r"});
}

TEST(Lines, OtherTerminators)
{
  using namespace std::string_view_literals;
  Views arguments;
  for (std::string_view argument : lines("java\0\0-jar\0"sv, '\0'))
    arguments.push_back(argument);
  EXPECT_EQ(arguments, (Views{"java", "", "-jar"}));
}

TEST(Lines, ViewsIntoTheText)
{
  std::string text = "first\nsecond";
  auto found = all_lines(text);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[1].data(), text.data() + 6);
}

TEST(TakeLine, ConsumesTheLineAndItsNewline)
{
  std::string_view text = "one\ntwo";
  EXPECT_EQ(take_line(text), "one");
  EXPECT_EQ(text, "two");
  EXPECT_EQ(take_line(text), "two");
  EXPECT_EQ(text, "");
  EXPECT_EQ(take_line(text), "");
}

} // namespace
} // namespace flamebpf::text
