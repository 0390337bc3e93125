#include <gtest/gtest.h>
#include <string>

#include "dwarf/cfa_instructions.h"

namespace flamebpf::dwarf {
namespace {

using Op = CfaInstruction::Op;

TEST(CfaInstructions, APrologueDecodesInstructionByInstruction)
{
  // What gcc writes for push %rbp; mov %rsp,%rbp: advance 1, def_cfa_offset 16, offset r6 at
  // -16 (factored 2), advance 3, def_cfa_register r6.
  std::string bytes("\x41\x0e\x10\x86\x02\x43\x0d\x06", 8);
  ByteCursor cursor(bytes);
  CfaEncoding encoding;
  CfaInstruction instruction;
  ASSERT_TRUE(decode_cfa_instruction(cursor, encoding, instruction));
  EXPECT_EQ(instruction.op, Op::kAdvance);
  EXPECT_EQ(instruction.address, 1u);
  ASSERT_TRUE(decode_cfa_instruction(cursor, encoding, instruction));
  EXPECT_EQ(instruction.op, Op::kDefCfaOffset);
  EXPECT_EQ(instruction.offset, 16);
  ASSERT_TRUE(decode_cfa_instruction(cursor, encoding, instruction));
  EXPECT_EQ(instruction.op, Op::kOffset);
  EXPECT_EQ(instruction.reg, 6u);
  EXPECT_EQ(instruction.offset, 2);
  ASSERT_TRUE(decode_cfa_instruction(cursor, encoding, instruction));
  EXPECT_EQ(instruction.op, Op::kAdvance);
  EXPECT_EQ(instruction.address, 3u);
  ASSERT_TRUE(decode_cfa_instruction(cursor, encoding, instruction));
  EXPECT_EQ(instruction.op, Op::kDefCfaRegister);
  EXPECT_EQ(instruction.reg, 6u);
  EXPECT_TRUE(cursor.at_end());
}

TEST(CfaInstructions, SetLocFollowsThePointerEncoding)
{
  // DW_EH_PE_pcrel|sdata4: relative to where the field is.
  std::string bytes("\x01\x10\x00\x00\x00", 5);
  ByteCursor cursor(bytes);
  CfaEncoding encoding{0x1b, 0x1000, 8};
  CfaInstruction instruction;
  ASSERT_TRUE(decode_cfa_instruction(cursor, encoding, instruction));
  EXPECT_EQ(instruction.op, Op::kSetLoc);
  EXPECT_EQ(instruction.address, 0x1000u + 1 + 0x10);
  // Indirect pointers are not followed: the instruction cannot be read.
  ByteCursor indirect(bytes);
  EXPECT_FALSE(decode_cfa_instruction(indirect, CfaEncoding{0x9b, 0x1000, 8}, instruction));
}

TEST(CfaInstructions, ExpressionsAreHandedOutAndUnknownOpcodesFail)
{
  std::string bytes("\x0f\x02\x77\x08\x3f", 5); // def_cfa_expression of 2 bytes; then 0x3f
  ByteCursor cursor(bytes);
  CfaInstruction instruction;
  ASSERT_TRUE(decode_cfa_instruction(cursor, CfaEncoding{}, instruction));
  EXPECT_EQ(instruction.op, Op::kDefCfaExpression);
  EXPECT_EQ(instruction.expression, std::string("\x77\x08", 2));
  EXPECT_FALSE(decode_cfa_instruction(cursor, CfaEncoding{}, instruction));
  // An expression longer than what is left runs past the end.
  std::string cut("\x10\x06\x09\x01", 4);
  ByteCursor short_cursor(cut);
  EXPECT_FALSE(decode_cfa_instruction(short_cursor, CfaEncoding{}, instruction));
}

} // namespace
} // namespace flamebpf::dwarf
