// The hashes flamebpf uses, and what each is for: FNV-1a where the same input must give the same
// number in every run and build (colours, file name marks, cache slots), SipHash where a target
// chooses the input and must not be able to make two inputs collide.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <sys/random.h>

namespace flamebpf {

// FNV-1a, 64 bits: stable, fast, and easy to collide on purpose.
class Fnv1a {
public:
  // seed is mixed into the offset basis, for hashes of one input that must differ.
  explicit Fnv1a(uint64_t seed = 0) : hash_(kOffsetBasis ^ seed) {}

  Fnv1a& add(std::string_view bytes)
  {
    for (char byte : bytes)
      add_word(static_cast<uint8_t>(byte));
    return *this;
  }
  Fnv1a& add(std::span<const unsigned char> bytes)
  {
    for (unsigned char byte : bytes)
      add_word(byte);
    return *this;
  }
  // One step of the hash over a whole word rather than a byte.
  Fnv1a& add_word(uint64_t word)
  {
    hash_ = (hash_ ^ word) * kPrime;
    return *this;
  }
  uint64_t value() const { return hash_; }

private:
  static constexpr uint64_t kOffsetBasis = 0xcbf29ce484222325ull;
  static constexpr uint64_t kPrime = 0x100000001b3ull;
  uint64_t hash_;
};

// SipHash-2-4 (Aumasson and Bernstein): a keyed hash whose outputs an attacker who does not know
// the key cannot make collide, unlike FNV or xxHash.
class SipHash {
public:
  explicit SipHash(const std::array<uint64_t, 2>& key)
  {
    v_[0] = key[0] ^ 0x736f6d6570736575ULL;
    v_[1] = key[1] ^ 0x646f72616e646f6dULL;
    v_[2] = key[0] ^ 0x6c7967656e657261ULL;
    v_[3] = key[1] ^ 0x7465646279746573ULL;
  }

  void update(std::string_view bytes)
  {
    size_t at = 0;
    // Bytes complete the word begun, then whole words go in as they are (a little-endian load is
    // the word the byte order of the algorithm makes), then the rest begins the next.
    while (at < bytes.size() && length_ % 8 != 0)
      add_byte(bytes[at++]);
    if constexpr (std::endian::native == std::endian::little) {
      for (; at + 8 <= bytes.size(); at += 8) {
        uint64_t word;
        std::memcpy(&word, bytes.data() + at, sizeof word);
        compress(word);
        length_ += 8;
      }
    }
    while (at < bytes.size())
      add_byte(bytes[at++]);
  }
  void update(uint64_t value)
  {
    char bytes[sizeof value];
    std::memcpy(bytes, &value, sizeof value);
    update(std::string_view(bytes, sizeof bytes));
  }

  uint64_t finish()
  {
    compress(tail_ | (length_ << 56));
    v_[2] ^= 0xff;
    for (int round = 0; round < 4; ++round)
      sip_round();
    return v_[0] ^ v_[1] ^ v_[2] ^ v_[3];
  }

private:
  static uint64_t rotate(uint64_t value, int bits)
  {
    return (value << bits) | (value >> (64 - bits));
  }
  void sip_round()
  {
    v_[0] += v_[1];
    v_[1] = rotate(v_[1], 13) ^ v_[0];
    v_[0] = rotate(v_[0], 32);
    v_[2] += v_[3];
    v_[3] = rotate(v_[3], 16) ^ v_[2];
    v_[0] += v_[3];
    v_[3] = rotate(v_[3], 21) ^ v_[0];
    v_[2] += v_[1];
    v_[1] = rotate(v_[1], 17) ^ v_[2];
    v_[2] = rotate(v_[2], 32);
  }
  void add_byte(char byte)
  {
    tail_ |= static_cast<uint64_t>(static_cast<uint8_t>(byte)) << (8 * (length_ % 8));
    ++length_;
    if (length_ % 8 == 0) {
      compress(tail_);
      tail_ = 0;
    }
  }
  void compress(uint64_t word)
  {
    v_[3] ^= word;
    sip_round();
    sip_round();
    v_[0] ^= word;
  }

  uint64_t v_[4];
  uint64_t tail_ = 0;
  uint64_t length_ = 0;
};

// The SipHash key of flamebpf's content hashes (drawn at random once per process), by which
// copies of one file in many targets share what was built from it, and a target cannot make
// another's file look like its own.
inline const std::array<uint64_t, 2>& content_hash_key()
{
  static const std::array<uint64_t, 2> key = [] {
    std::array<uint64_t, 2> drawn{};
    // getrandom of 16 bytes from the urandom pool neither blocks after boot nor returns short.
    if (getrandom(drawn.data(), sizeof drawn, 0) != static_cast<ssize_t>(sizeof drawn))
      drawn = {0x0123456789abcdefULL, 0xfedcba9876543210ULL};
    return drawn;
  }();
  return key;
}

} // namespace flamebpf
