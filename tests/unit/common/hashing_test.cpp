// SipHash-2-4 against its authors' test vector, and the same hash whatever pieces the bytes come
// in (whole words are taken at once, the rest byte by byte).
#include <array>
#include <gtest/gtest.h>
#include <string>

#include "common/hashing.h"

namespace flamebpf {
namespace {

// Key 00 01 … 0f, as two little-endian words.
constexpr std::array<uint64_t, 2> kKey{0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL};

std::string counting_bytes(size_t count)
{
  std::string bytes;
  for (size_t i = 0; i < count; ++i)
    bytes.push_back(static_cast<char>(i));
  return bytes;
}

TEST(SipHash, MatchesTheReferenceVector)
{
  // The paper's appendix A: the 15 bytes 00 01 … 0e.
  SipHash hash(kKey);
  hash.update(counting_bytes(15));
  EXPECT_EQ(hash.finish(), 0xa129ca6149be45e5ULL);
}

TEST(SipHash, PiecesOfAnySizeGiveOneHash)
{
  std::string bytes = counting_bytes(203);
  SipHash whole(kKey);
  whole.update(bytes);
  uint64_t expected = whole.finish();
  for (size_t piece : {1, 3, 7, 8, 9, 16, 31, 64}) {
    SipHash pieces(kKey);
    for (size_t at = 0; at < bytes.size(); at += piece)
      pieces.update(std::string_view(bytes).substr(at, piece));
    EXPECT_EQ(pieces.finish(), expected) << "pieces of " << piece;
  }
}

} // namespace
} // namespace flamebpf
