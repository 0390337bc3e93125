// The DWARF constants flamebpf's readers need (DWARF 5, section 7, and the GNU extensions).
#pragma once

#include <cstdint>

namespace flamebpf::dwarf {

enum Tag : uint32_t {
  kTagInlinedSubroutine = 0x1d,
  kTagCompileUnit = 0x11,
  kTagSubprogram = 0x2e,
  kTagPartialUnit = 0x3c,
};
enum Attribute : uint32_t {
  kAtName = 0x03,
  kAtLowPc = 0x11,
  kAtHighPc = 0x12,
  kAtAbstractOrigin = 0x31,
  kAtSpecification = 0x47,
  kAtRanges = 0x55,
  kAtLinkageName = 0x6e,
  kAtStrOffsetsBase = 0x72,
  kAtAddrBase = 0x73,
  kAtRnglistsBase = 0x74,
  kAtMipsLinkageName = 0x2007,
  kAtGnuAddrBase = 0x2133,
};
enum Form : uint32_t {
  kFormAddr = 0x01,
  kFormBlock2 = 0x03,
  kFormBlock4 = 0x04,
  kFormData2 = 0x05,
  kFormData4 = 0x06,
  kFormData8 = 0x07,
  kFormString = 0x08,
  kFormBlock = 0x09,
  kFormBlock1 = 0x0a,
  kFormData1 = 0x0b,
  kFormFlag = 0x0c,
  kFormSdata = 0x0d,
  kFormStrp = 0x0e,
  kFormUdata = 0x0f,
  kFormRefAddr = 0x10,
  kFormRef1 = 0x11,
  kFormRef2 = 0x12,
  kFormRef4 = 0x13,
  kFormRef8 = 0x14,
  kFormRefUdata = 0x15,
  kFormIndirect = 0x16,
  kFormSecOffset = 0x17,
  kFormExprloc = 0x18,
  kFormFlagPresent = 0x19,
  kFormStrx = 0x1a,
  kFormAddrx = 0x1b,
  kFormRefSup4 = 0x1c,
  kFormStrpSup = 0x1d,
  kFormData16 = 0x1e,
  kFormLineStrp = 0x1f,
  kFormRefSig8 = 0x20,
  kFormImplicitConst = 0x21,
  kFormLoclistx = 0x22,
  kFormRnglistx = 0x23,
  kFormRefSup8 = 0x24,
  kFormStrx1 = 0x25,
  kFormStrx2 = 0x26,
  kFormStrx3 = 0x27,
  kFormStrx4 = 0x28,
  kFormAddrx1 = 0x29,
  kFormAddrx2 = 0x2a,
  kFormAddrx3 = 0x2b,
  kFormAddrx4 = 0x2c,
  kFormGnuAddrIndex = 0x1f01,
  kFormGnuStrIndex = 0x1f02,
  kFormGnuRefAlt = 0x1f20,
  kFormGnuStrpAlt = 0x1f21,
};
enum UnitType : uint8_t {
  kUnitCompile = 1,
  kUnitType = 2,
  kUnitPartial = 3,
  kUnitSkeleton = 4,
  kUnitSplitCompile = 5,
  kUnitSplitType = 6,
};
enum RangeListEntry : uint8_t {
  kRleEndOfList = 0,
  kRleBaseAddressx = 1,
  kRleStartxEndx = 2,
  kRleStartxLength = 3,
  kRleOffsetPair = 4,
  kRleBaseAddress = 5,
  kRleStartEnd = 6,
  kRleStartLength = 7,
};

// Newer than Debian 12's elf.h.
constexpr uint32_t kCompressZstd = 2;
} // namespace flamebpf::dwarf
