// A unit's abbreviation table (.debug_abbrev): what each DIE's code says of its tag, children
// and attributes' forms. Bounded: a hostile table fails to read rather than grow without end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/byte_cursor.h"
#include "dwarf/constants.h"

namespace flamebpf::dwarf {

// An abbreviation table's entries, and one entry's attributes (real ones: hundreds, a few dozen).
inline constexpr size_t kMaxAbbrevs = 1 << 16;
inline constexpr size_t kMaxAbbrevAttributes = 256;
// All attributes of one table (16 bytes each): the caps above alone would allow 256 MiB.
inline constexpr size_t kMaxAbbrevTableAttributes = 1 << 16;
struct AttributeSpec {
  uint32_t name = 0;
  uint32_t form = 0;
  int64_t implicit = 0;
};
struct Abbrev {
  uint32_t tag = 0;
  bool children = false;
  uint32_t first = 0; // in AbbrevTable::specs
  uint32_t count = 0;
};

class AbbrevTable {
public:
  // Reads the table at offset of .debug_abbrev; false if malformed or over the caps.
  bool read(std::string_view section, uint64_t offset)
  {
    dense_.clear();
    sparse_.clear();
    specs_.clear();
    if (offset >= section.size())
      return false;
    ByteCursor cursor(section, static_cast<size_t>(offset));
    for (size_t entries = 0;; ++entries) {
      uint64_t code = cursor.uleb();
      if (!cursor.ok())
        return false;
      if (code == 0)
        return true;
      if (entries >= kMaxAbbrevs)
        return false;
      Abbrev abbrev;
      abbrev.tag = static_cast<uint32_t>(cursor.uleb());
      abbrev.children = cursor.fixed(1) != 0;
      abbrev.first = static_cast<uint32_t>(specs_.size());
      for (;;) {
        AttributeSpec spec;
        uint64_t name = cursor.uleb();
        uint64_t form = cursor.uleb();
        if (!cursor.ok() || name > UINT32_MAX || form > UINT32_MAX)
          return false;
        if (name == 0 && form == 0)
          break;
        if (abbrev.count >= kMaxAbbrevAttributes || specs_.size() >= kMaxAbbrevTableAttributes)
          return false;
        spec.name = static_cast<uint32_t>(name);
        spec.form = static_cast<uint32_t>(form);
        if (form == kFormImplicitConst)
          spec.implicit = cursor.sleb();
        specs_.push_back(spec);
        ++abbrev.count;
      }
      if (code < kMaxAbbrevs) {
        if (dense_.size() <= code)
          dense_.resize(code + 1);
        dense_[code] = abbrev;
      } else {
        sparse_[code] = abbrev;
      }
    }
  }

  const Abbrev* find(uint64_t code) const
  {
    if (code < dense_.size())
      return dense_[code].count || dense_[code].tag ? &dense_[code] : nullptr;
    auto it = sparse_.find(code);
    return it == sparse_.end() ? nullptr : &it->second;
  }
  const AttributeSpec& spec(uint32_t index) const { return specs_[index]; }
  // What it holds, roughly.
  size_t held() const
  {
    return dense_.capacity() * sizeof(Abbrev) + sparse_.size() * 64 +
           specs_.capacity() * sizeof(AttributeSpec);
  }

private:
  std::vector<Abbrev> dense_; // by code, for the usual codes 1, 2, 3, ...
  std::unordered_map<uint64_t, Abbrev> sparse_;
  std::vector<AttributeSpec> specs_;
};

} // namespace flamebpf::dwarf
