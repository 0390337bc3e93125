// The line of each instruction from a CPython 3.11 location table, against the interpreter's own
// answer (code.co_lines()) for functions whose lines move every way a table can say: forward by
// one and by many, back, within one line, over lines with no code, and with instructions that have
// no line. And tables a target could forge: cut short, endless, malformed.
#include <gtest/gtest.h>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "process.h"
#include "runtimes/cpython/cpython_lines.h"
#include "temp_dir.h"
#include "test_support.h"

namespace flamebpf::cpython {
namespace {

// Prints, for each code object of the module (the module's too): its first line, its location
// table in hex, then each range of co_lines() as "start end line" (byte offsets; -1 for none).
constexpr const char* kDumper = R"(import sys


def sample(items, flag):
    total = 0
    for item in items:
        if item % 3 == 0 and flag:
            total += (item *
                      2)



        elif item:
            total -= [x for x in range(item) if x][-1] if item > 1 else 0
    try:
        total //= len(items)
    except ZeroDivisionError:
        total = -1
    return (total,
            flag)


def codes(code):
    yield code
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            yield from codes(const)


for code in codes(compile(open(sys.argv[1]).read(), sys.argv[1], "exec")):
    print("code", code.co_qualname, code.co_firstlineno, code.co_linetable.hex())
    for start, end, line in code.co_lines():
        print("range", start, end, -1 if line is None else line)
)";

std::string unhex(const std::string& hex)
{
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return bytes;
}

TEST(CPythonLines, EveryInstructionHasTheLineTheInterpreterGivesIt)
{
  testing::TempDir dir;
  auto script = dir.path() / "dumper.py";
  testing::write_file(script, kDumper);
  auto run = testing::run_process({"/usr/bin/python3.11", script.string(), script.string()}, {},
                                  std::chrono::seconds(30));
  ASSERT_EQ(run.status, 0) << run.err;
  std::istringstream lines(run.out);
  std::string table;
  uint32_t first_line = 0;
  size_t codes = 0;
  size_t instructions = 0;
  size_t without_line = 0;
  std::string name;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string what;
    fields >> what;
    if (what == "code") {
      std::string hex;
      fields >> name >> first_line >> hex;
      table = unhex(hex);
      ++codes;
      continue;
    }
    uint32_t start = 0;
    uint32_t end = 0;
    int64_t expected = 0;
    fields >> start >> end >> expected;
    for (uint32_t unit = start / 2; unit < end / 2; ++unit) {
      auto found = line_of_instruction(table, first_line, unit);
      if (expected < 0) {
        EXPECT_FALSE(found) << name << " unit " << unit;
        ++without_line;
      } else {
        ASSERT_TRUE(found) << name << " unit " << unit;
        EXPECT_EQ(*found, static_cast<uint32_t>(expected)) << name << " unit " << unit;
      }
      ++instructions;
    }
  }
  // The module, sample, its list comprehension, codes and its generator.
  EXPECT_GE(codes, 4u);
  EXPECT_GT(instructions, 100u);
  EXPECT_GT(without_line, 0u) << run.out;
}

TEST(CPythonLines, AForgedTableEndsTheWalkUnanswered)
{
  // A start byte without its top bit.
  EXPECT_FALSE(line_of_instruction(std::string("\x01\x02", 2), 1, 0));
  // A long form whose line delta runs on past the end, and one that never ends.
  EXPECT_FALSE(line_of_instruction(std::string("\xf0\x41", 2), 1, 0));
  EXPECT_FALSE(line_of_instruction(std::string(64, '\xf0') + std::string(64, '\x7f'), 1, 100));
  // One-line forms cut before their columns.
  EXPECT_FALSE(line_of_instruction(std::string("\xd0\x01", 2), 1, 0));
  // A line delta that goes below zero.
  EXPECT_FALSE(line_of_instruction(std::string("\xe8\x05", 2), 1, 0));
  // Past the table's end.
  EXPECT_FALSE(line_of_instruction(std::string("\xd0\x01\x02", 3), 7, 1));
  EXPECT_EQ(line_of_instruction(std::string("\xd0\x01\x02", 3), 7, 0), 7u);
  EXPECT_FALSE(line_of_instruction({}, 7, 0));
}

// A code object's lines are decoded once into spans of units, neighbours of one line joined, and
// each unit is looked up in them.
TEST(CPythonLines, SpansJoinEntriesOfOneLineAndAnswerAsTheTableDoes)
{
  // Two short-form entries at the first line (2 units, then 1), a one-line form a line on (1
  // unit), one with no location (1 unit).
  std::string table("\x81\x00\x80\x00\xd8\x01\x02\xf8", 8);
  std::vector<LineSpan> spans = line_spans(table, 7);
  EXPECT_EQ(spans, (std::vector<LineSpan>{{3, 7}, {4, 8}, {5, kNoLine}}));
  std::vector<std::optional<uint32_t>> lines;
  for (uint32_t unit = 0; unit < 6; ++unit) {
    lines.push_back(line_in_spans(spans, unit));
    EXPECT_EQ(lines.back(), line_of_instruction(table, 7, unit)) << unit;
  }
  EXPECT_EQ(lines,
            (std::vector<std::optional<uint32_t>>{7u, 7u, 7u, 8u, std::nullopt, std::nullopt}));
  // A table that breaks off keeps the spans before the break.
  EXPECT_EQ(line_spans(table.substr(0, 5), 7), (std::vector<LineSpan>{{3, 7}}));
  EXPECT_TRUE(line_spans({}, 7).empty());
}

} // namespace
} // namespace flamebpf::cpython
