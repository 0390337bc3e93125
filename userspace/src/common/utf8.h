// Valid UTF-8 out of any bytes. Names from targets (process, frame, cgroup and container names)
// are bytes a target chose; the outputs that must be UTF-8 text (JSON, pprof's strings, folded
// text) replace each byte that starts no valid sequence with U+FFFD, as XML output does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace flamebpf::utf8 {

// U+FFFD REPLACEMENT CHARACTER, what a byte outside any valid sequence becomes.
inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// The length of the valid UTF-8 sequence starting at text[at] (1 to 4), or 0 if none starts
// there: a stray continuation byte, a cut or overlong sequence, a surrogate or a code point above
// U+10FFFF. code_point receives the character of a valid sequence.
inline size_t sequence_at(std::string_view text, size_t at, char32_t& code_point)
{
  auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  uint8_t lead = byte(at);
  size_t length = lead < 0x80             ? 1
                  : (lead & 0xE0) == 0xC0 ? 2
                  : (lead & 0xF0) == 0xE0 ? 3
                  : (lead & 0xF8) == 0xF0 ? 4
                                          : 0;
  if (length == 0 || at + length > text.size())
    return 0;
  char32_t value = length == 1   ? lead
                   : length == 2 ? lead & 0x1Fu
                   : length == 3 ? lead & 0x0Fu
                                 : lead & 0x07u;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(at + k) & 0xC0) != 0x80)
      return 0;
    value = (value << 6) | (byte(at + k) & 0x3Fu);
  }
  static constexpr char32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (value < kSmallest[length] || (value >= 0xD800 && value <= 0xDFFF) || value > 0x10FFFF)
    return 0;
  code_point = value;
  return length;
}

// Appends code_point as UTF-8; a surrogate or a value above U+10FFFF, which is no character,
// becomes U+FFFD.
inline void append_code_point(std::string& out, char32_t code_point)
{
  if ((code_point >= 0xD800 && code_point <= 0xDFFF) || code_point > 0x10FFFF) {
    out += kReplacement;
  } else if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

// Whether text is valid UTF-8 throughout.
inline bool is_valid(std::string_view text)
{
  char32_t ignored = 0;
  for (size_t at = 0; at < text.size();) {
    size_t length = sequence_at(text, at, ignored);
    if (length == 0)
      return false;
    at += length;
  }
  return true;
}

// Appends text to out with every byte that starts no valid sequence replaced by U+FFFD.
inline void append_valid(std::string& out, std::string_view text)
{
  char32_t ignored = 0;
  for (size_t at = 0; at < text.size();) {
    size_t length = sequence_at(text, at, ignored);
    if (length == 0) {
      out += kReplacement;
      ++at;
    } else {
      out.append(text, at, length);
      at += length;
    }
  }
}

// text as valid UTF-8 (itself when it already is).
inline std::string valid(std::string_view text)
{
  std::string out;
  out.reserve(text.size());
  append_valid(out, text);
  return out;
}

} // namespace flamebpf::utf8
