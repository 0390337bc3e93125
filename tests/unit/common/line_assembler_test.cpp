#include <gtest/gtest.h>
#include <string>
#include <vector>

#include "common/line_assembler.h"

namespace flamebpf {
namespace {

struct Lines {
  LineAssembler assembler{8};
  std::vector<std::string> got;

  LineAssembler::Taken take(std::string_view text)
  {
    return assembler.take(text, [this](std::string_view line) { got.emplace_back(line); });
  }
};

TEST(LineAssembler, AnUnfinishedLineWaitsForItsEnd)
{
  Lines lines;
  auto taken = lines.take("one\ntw");
  EXPECT_EQ(lines.got, (std::vector<std::string>{"one"}));
  EXPECT_EQ(taken.kept_bytes, 6u);
  lines.take("o\n\nthree\n");
  EXPECT_EQ(lines.got, (std::vector<std::string>{"one", "two", "three"})); // empty lines skipped
}

TEST(LineAssembler, AnOverlongLineIsSkippedToItsEndAcrossPiecesAndCountedOnce)
{
  Lines lines;
  auto first = lines.take("12345");
  EXPECT_EQ(first.overlong, 0u);
  auto second = lines.take("6789"); // 9 bytes: over the budget of 8
  EXPECT_EQ(second.overlong, 1u);
  EXPECT_EQ(second.kept_bytes, 0u);
  EXPECT_TRUE(lines.assembler.skipping());
  auto third = lines.take("more of it\nok\n");
  EXPECT_EQ(third.overlong, 0u);
  EXPECT_EQ(third.kept_bytes, 3u);
  EXPECT_FALSE(lines.assembler.skipping());
  EXPECT_EQ(lines.got, (std::vector<std::string>{"ok"}));
}

TEST(LineAssembler, ALineOfExactlyTheBudgetIsKept)
{
  Lines lines;
  lines.take("1234");
  lines.take("5678\n");
  EXPECT_EQ(lines.got, (std::vector<std::string>{"12345678"}));
}

TEST(LineAssembler, ClearForgetsTheUnfinishedLine)
{
  Lines lines;
  lines.take("half");
  lines.assembler.clear();
  lines.take("new\n");
  EXPECT_EQ(lines.got, (std::vector<std::string>{"new"}));
}

} // namespace
} // namespace flamebpf
