#include <gtest/gtest.h>
#include <string>

#include "dwarf/abbreviations.h"
#include "dwarf/constants.h"
#include "dwarf/forms.h"

namespace flamebpf::dwarf {
namespace {

Unit unit64(uint8_t offset_size = 4)
{
  Unit unit;
  unit.version = 5;
  unit.offset_size = offset_size;
  unit.address_size = 8;
  return unit;
}

TEST(DwarfForms, EachFormReadsItsOwnWidthAndKind)
{
  std::string bytes("\x10\x20\x30\x40\x50\x60\x70\x80" // addr
                    "\x2a"                             // strx1
                    "\x04\x03\x02\x01"                 // strp (offset_size 4)
                    "\xe5\x8e\x26"                     // udata 624485
                    "\x7f",                            // sdata -1
                    17);
  ByteCursor cursor(bytes);
  Value value;
  ASSERT_TRUE(read_form(cursor, kFormAddr, 0, unit64(), value));
  EXPECT_EQ(value.kind, Kind::kAddress);
  EXPECT_EQ(value.number, 0x8070605040302010u);
  ASSERT_TRUE(read_form(cursor, kFormStrx1, 0, unit64(), value));
  EXPECT_EQ(value.kind, Kind::kStringIndex);
  EXPECT_EQ(value.number, 0x2au);
  ASSERT_TRUE(read_form(cursor, kFormStrp, 0, unit64(), value));
  EXPECT_EQ(value.kind, Kind::kStringOffset);
  EXPECT_EQ(value.number, 0x01020304u);
  ASSERT_TRUE(read_form(cursor, kFormUdata, 0, unit64(), value));
  EXPECT_EQ(value.number, 624485u);
  ASSERT_TRUE(read_form(cursor, kFormSdata, 0, unit64(), value));
  EXPECT_EQ(static_cast<int64_t>(value.number), -1);
  EXPECT_TRUE(cursor.at_end());
}

TEST(DwarfForms, ImplicitConstantsAndFlagsTakeNoBytes)
{
  std::string bytes;
  ByteCursor cursor(bytes);
  Value value;
  ASSERT_TRUE(read_form(cursor, kFormImplicitConst, -7, unit64(), value));
  EXPECT_EQ(static_cast<int64_t>(value.number), -7);
  ASSERT_TRUE(read_form(cursor, kFormFlagPresent, 0, unit64(), value));
  EXPECT_EQ(value.number, 1u);
}

TEST(DwarfForms, IndirectFormsGoOneLevelDeepOnly)
{
  Value value;
  std::string once("\x0b\x09", 2); // indirect -> data1 9
  ByteCursor good(once);
  ASSERT_TRUE(read_form(good, kFormIndirect, 0, unit64(), value));
  EXPECT_EQ(value.number, 9u);
  std::string twice("\x16\x0b\x09", 3); // indirect -> indirect -> data1
  ByteCursor bad(twice);
  EXPECT_FALSE(read_form(bad, kFormIndirect, 0, unit64(), value));
  std::string implicit("\x21", 1); // indirect -> implicit_const, which has no value here
  ByteCursor none(implicit);
  EXPECT_FALSE(read_form(none, kFormIndirect, 0, unit64(), value));
}

TEST(DwarfForms, UnknownAndTruncatedFormsFail)
{
  Value value;
  std::string bytes("\x01\x02", 2);
  ByteCursor unknown(bytes);
  EXPECT_FALSE(read_form(unknown, 0x7f, 0, unit64(), value));
  ByteCursor short_read(bytes);
  EXPECT_FALSE(read_form(short_read, kFormData4, 0, unit64(), value));
  // 64-bit DWARF's section offsets are 8 bytes.
  std::string offset8("\x01\x00\x00\x00\x00\x00\x00\x01", 8);
  ByteCursor wide(offset8);
  ASSERT_TRUE(read_form(wide, kFormSecOffset, 0, unit64(8), value));
  EXPECT_EQ(value.number, 0x0100000000000001u);
}

TEST(DwarfAbbreviations, ATableReadsItsEntriesAndRefusesGarbage)
{
  // Code 1: DW_TAG_subprogram, children, name:strp, inline:implicit_const 3; then the end.
  std::string table("\x01\x2e\x01\x03\x0e\x20\x21\x03\x00\x00\x00", 11);
  AbbrevTable abbrevs;
  ASSERT_TRUE(abbrevs.read(table, 0));
  const Abbrev* entry = abbrevs.find(1);
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->tag, kTagSubprogram);
  EXPECT_TRUE(entry->children);
  ASSERT_EQ(entry->count, 2u);
  EXPECT_EQ(abbrevs.spec(entry->first).form, kFormStrp);
  EXPECT_EQ(abbrevs.spec(entry->first + 1).implicit, 3);
  EXPECT_EQ(abbrevs.find(2), nullptr);
  // Cut inside an entry, or past the section: not a table.
  EXPECT_FALSE(abbrevs.read(table.substr(0, 5), 0));
  EXPECT_FALSE(abbrevs.read(table, table.size()));
}

} // namespace
} // namespace flamebpf::dwarf
