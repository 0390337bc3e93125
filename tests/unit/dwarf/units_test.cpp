#include <gtest/gtest.h>
#include <string>

#include "common/result.h"
#include "dwarf/constants.h"
#include "dwarf/units.h"

namespace flamebpf::dwarf {
namespace {

// .debug_info's bytes as SectionStream hands them out, from memory; fails past fail_at.
class BytesStream {
public:
  explicit BytesStream(std::string bytes, size_t fail_at = SIZE_MAX)
      : bytes_(std::move(bytes)), fail_at_(fail_at)
  {
  }
  Result<size_t> pull(std::string& out, uint64_t count)
  {
    if (at_ >= fail_at_)
      return fail(error("read error"));
    size_t got = std::min<uint64_t>(count, bytes_.size() - at_);
    out.append(bytes_, at_, got);
    at_ += got;
    return got;
  }
  Result<uint64_t> skip(uint64_t count)
  {
    size_t passed = std::min<uint64_t>(count, bytes_.size() - at_);
    at_ += passed;
    return passed;
  }

private:
  std::string bytes_;
  size_t at_ = 0;
  size_t fail_at_;
};

std::string le(uint64_t value, int bytes)
{
  std::string out;
  for (int i = 0; i < bytes; ++i)
    out.push_back(static_cast<char>(value >> (8 * i)));
  return out;
}

// A DWARF 5 unit of type: version, unit type, address size, abbreviation offset, one zero DIE.
std::string unit32(uint8_t type, uint8_t address_size = 8, uint32_t abbrev_offset = 0x40)
{
  std::string body = le(5, 2) + le(type, 1) + le(address_size, 1) + le(abbrev_offset, 4) + '\0';
  return le(body.size(), 4) + body;
}

std::string unit64_v4(uint64_t abbrev_offset)
{
  std::string body = le(4, 2) + le(abbrev_offset, 8) + le(8, 1) + '\0';
  return le(0xffffffff, 4) + le(body.size(), 8) + body;
}

TEST(DwarfUnits, WalksUnitsOf32And64BitDwarfAndReadsTheirHeaders)
{
  std::string first = unit32(kUnitCompile);
  std::string second = unit64_v4(0x1234);
  BytesStream stream(first + second);
  UnitWalk walk(stream);
  std::string unit;

  auto extent = walk.next(unit);
  ASSERT_TRUE(extent);
  EXPECT_EQ(extent->offset, 0u);
  EXPECT_EQ(extent->header_size, 4u);
  EXPECT_EQ(extent->offset_size, 4);
  ASSERT_TRUE(walk.read(unit, *extent));
  EXPECT_EQ(unit, first);
  UnitHeader header = read_unit_header(unit, *extent);
  EXPECT_EQ(header.kind, UnitKind::kCode);
  EXPECT_EQ(header.unit.version, 5);
  EXPECT_EQ(header.unit.address_size, 8);
  EXPECT_EQ(header.abbrev_offset, 0x40u);
  EXPECT_EQ(header.dies_at, first.size() - 1);

  extent = walk.next(unit);
  ASSERT_TRUE(extent);
  EXPECT_EQ(extent->offset, first.size());
  EXPECT_EQ(extent->header_size, 12u);
  EXPECT_EQ(extent->offset_size, 8);
  ASSERT_TRUE(walk.read(unit, *extent));
  header = read_unit_header(unit, *extent);
  EXPECT_EQ(header.kind, UnitKind::kCode);
  EXPECT_EQ(header.unit.version, 4);
  EXPECT_EQ(header.unit.offset, first.size());
  EXPECT_EQ(header.abbrev_offset, 0x1234u);

  EXPECT_FALSE(walk.next(unit));
  EXPECT_EQ(walk.end(), WalkEnd::kEnded);
}

TEST(DwarfUnits, SkipsAUnitUnreadAndGoesOnToTheNext)
{
  std::string big = unit32(kUnitCompile) + std::string(100, 'x');
  big.replace(0, 4, le(big.size() - 4, 4));
  BytesStream stream(big + unit32(kUnitPartial));
  UnitWalk walk(stream);
  std::string unit;
  auto extent = walk.next(unit);
  ASSERT_TRUE(extent);
  ASSERT_TRUE(walk.skip(*extent));
  extent = walk.next(unit);
  ASSERT_TRUE(extent);
  EXPECT_EQ(extent->offset, big.size());
  ASSERT_TRUE(walk.read(unit, *extent));
  EXPECT_EQ(read_unit_header(unit, *extent).kind, UnitKind::kCode);
}

TEST(DwarfUnits, LengthsNoUnitCanHaveEndTheWalk)
{
  for (uint32_t length : {0xfffffff0u, 0xfffffffeu, 0u, 1u}) {
    BytesStream stream(le(length, 4) + std::string(16, '\0'));
    UnitWalk walk(stream);
    std::string unit;
    EXPECT_FALSE(walk.next(unit)) << length;
    EXPECT_EQ(walk.end(), WalkEnd::kMalformed) << length;
  }
  BytesStream partial_length(std::string("\x10\x00", 2));
  UnitWalk walk(partial_length);
  std::string unit;
  EXPECT_FALSE(walk.next(unit));
  EXPECT_EQ(walk.end(), WalkEnd::kMalformed);
}

TEST(DwarfUnits, ASectionThatEndsInsideAUnitIsCutAndAFailedReadSaysWhy)
{
  std::string whole = unit32(kUnitCompile);
  BytesStream cut(whole.substr(0, whole.size() - 3));
  UnitWalk walk(cut);
  std::string unit;
  auto extent = walk.next(unit);
  ASSERT_TRUE(extent);
  EXPECT_FALSE(walk.read(unit, *extent));
  EXPECT_EQ(walk.end(), WalkEnd::kCut);

  BytesStream cut_64bit_length(le(0xffffffff, 4) + le(20, 4));
  UnitWalk walk64(cut_64bit_length);
  EXPECT_FALSE(walk64.next(unit));
  EXPECT_EQ(walk64.end(), WalkEnd::kCut);

  BytesStream failing(whole + whole, whole.size());
  UnitWalk failing_walk(failing);
  extent = failing_walk.next(unit);
  ASSERT_TRUE(extent);
  ASSERT_TRUE(failing_walk.read(unit, *extent));
  EXPECT_FALSE(failing_walk.next(unit));
  EXPECT_EQ(failing_walk.end(), WalkEnd::kFailed);
  EXPECT_EQ(failing_walk.error(), "read error");
}

TEST(DwarfUnits, HeadersSayWhichUnitsHoldCode)
{
  auto kind_of = [](const std::string& bytes) {
    UnitExtent extent{0, 4, bytes.size() - 4, 4};
    return read_unit_header(bytes, extent).kind;
  };
  EXPECT_EQ(kind_of(unit32(kUnitType)), UnitKind::kTypes);
  EXPECT_EQ(kind_of(unit32(kUnitSplitType)), UnitKind::kTypes);
  EXPECT_EQ(kind_of(unit32(kUnitSkeleton)), UnitKind::kSplit);
  EXPECT_EQ(kind_of(unit32(kUnitSplitCompile)), UnitKind::kSplit);
  EXPECT_EQ(kind_of(unit32(0x80)), UnitKind::kUnsupported);
  EXPECT_EQ(kind_of(unit32(kUnitCompile, 3)), UnitKind::kMalformed);
  std::string version6 = unit32(kUnitCompile);
  version6[4] = 6;
  EXPECT_EQ(kind_of(version6), UnitKind::kUnsupported);
  std::string short_header = le(3, 4) + le(4, 2) + '\0';
  EXPECT_EQ(kind_of(short_header), UnitKind::kMalformed);
}

} // namespace
} // namespace flamebpf::dwarf
