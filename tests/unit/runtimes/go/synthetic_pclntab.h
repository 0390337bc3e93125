// Go pclntabs written byte by byte in each layout, for the layouts no toolchain here writes (Go
// 1.2 to 1.17) and for hostile tables: a few functions with names and stack-pointer tables, laid
// out as runtime/symtab.go describes. 64-bit, this machine's byte order.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "runtimes/go/pclntab.h"

namespace flamebpf::testing {

struct SyntheticGoFunction {
  std::string name;
  uint32_t size = 0; // bytes of code
  // Runs of the stack-pointer delta, in order from the entry: (bytes of code, delta).
  std::vector<std::pair<uint32_t, int32_t>> stack_deltas;
  uint8_t flag = 0; // funcFlag, written by Go 1.18+ layouts only
};

class SyntheticPclntab {
public:
  // The table's code starts at text (a virtual address), functions one after the other.
  SyntheticPclntab(go::PclntabLayout layout, uint64_t text) : layout_(layout), text_(text) {}

  void add(SyntheticGoFunction function) { functions_.push_back(std::move(function)); }

  std::string bytes() const
  {
    bool go12 = layout_ == go::PclntabLayout::kGo12;
    bool go116 = layout_ == go::PclntabLayout::kGo116;
    bool offsets32 = !go12 && !go116; // 1.18+: entries are 32-bit offsets from the text
    // The parts the header points at, each from 0: names, pc-value tables, function table and
    // records.
    std::string names, tables, records;
    std::vector<uint64_t> name_at, table_at;
    for (const auto& function : functions_) {
      name_at.push_back(names.size());
      names += function.name;
      names.push_back('\0');
      table_at.push_back(tables.size());
      int32_t value = -1;
      for (auto [length, delta] : function.stack_deltas) {
        uleb(tables, zigzag(delta - value));
        uleb(tables, length);
        value = delta;
      }
      tables.push_back('\0');
    }
    size_t header_words = go12 ? 1 : go116 ? 7 : 8;
    size_t header = 8 + 8 * header_words;
    size_t entry_bytes = offsets32 ? 4 : 8;
    size_t function_table_size = ((functions_.size() * 2 + 1) * entry_bytes + 7) / 8 * 8;
    size_t record_size = go12 ? 40 : layout_ == go::PclntabLayout::kGo118 ? 40 : 48;
    // Go 1.2 puts the function table right after its header, names and tables after the records,
    // every offset counted from the table's start; later layouts put names and tables first and
    // give the header their offsets.
    size_t names_at = 0, tables_at = 0, function_table_at = 0;
    if (go12) {
      function_table_at = header;
      names_at = function_table_at + function_table_size + record_size * functions_.size();
      tables_at = names_at + names.size();
    } else {
      names_at = header;
      tables_at = names_at + names.size();
      function_table_at = (tables_at + tables.size() + 7) / 8 * 8;
    }
    std::string function_table;
    std::string record_bytes;
    uint64_t entry = text_;
    for (size_t i = 0; i < functions_.size(); ++i) {
      uint64_t record = function_table_size + record_bytes.size(); // from the function table
      put(function_table, offsets32 ? entry - text_ : entry, entry_bytes);
      put(function_table, go12 ? function_table_at + record : record, entry_bytes);
      uint64_t name = go12 ? names_at + name_at[i] : name_at[i];
      uint64_t pcsp = go12 ? tables_at + table_at[i] : table_at[i];
      std::string r;
      put(r, offsets32 ? entry - text_ : entry, offsets32 ? 4 : 8);
      put(r, name, 4);
      put(r, 0, 4); // args
      put(r, 0, 4); // deferreturn
      put(r, pcsp, 4);
      put(r, 0, 4); // pcfile
      put(r, 0, 4); // pcln
      put(r, 0, 4); // npcdata
      if (!go12)
        put(r, 0, 4); // cuOffset
      if (layout_ == go::PclntabLayout::kGo120)
        put(r, 0, 4); // startLine
      // funcID, flag (Go 1.18+; a pad before), pad, nfuncdata
      put(r, offsets32 ? uint64_t{functions_[i].flag} << 8 : 0, 4);
      r.resize(record_size, '\0');
      record_bytes += r;
      entry += functions_[i].size;
    }
    put(function_table, offsets32 ? entry - text_ : entry, entry_bytes);
    function_table.resize(function_table_size, '\0');

    std::string out;
    uint32_t magic = go12                                   ? 0xfffffffb
                     : go116                                ? 0xfffffffa
                     : layout_ == go::PclntabLayout::kGo118 ? 0xfffffff0
                                                            : 0xfffffff1;
    put(out, magic, 4);
    out += std::string("\0\0\x01\x08", 4); // pads, pc quantum 1, pointer size 8
    put(out, functions_.size(), 8);
    if (!go12) {
      put(out, 0, 8); // nfiles
      if (offsets32)
        put(out, text_, 8);
      put(out, names_at, 8);          // funcnameOffset
      put(out, names_at, 8);          // cuOffset (no files)
      put(out, names_at, 8);          // filetabOffset (no files)
      put(out, tables_at, 8);         // pctabOffset
      put(out, function_table_at, 8); // pclnOffset
    }
    if (go12) {
      out += function_table;
      out += record_bytes;
      out += names;
      out += tables;
    } else {
      out += names;
      out += tables;
      out.resize(function_table_at, '\0');
      out += function_table;
      out += record_bytes;
    }
    return out;
  }

private:
  static uint64_t zigzag(int32_t value)
  {
    return (static_cast<uint32_t>(value) << 1) ^ static_cast<uint32_t>(value >> 31);
  }
  static void uleb(std::string& out, uint64_t value)
  {
    do {
      uint8_t byte = value & 0x7f;
      value >>= 7;
      out.push_back(static_cast<char>(byte | (value ? 0x80 : 0)));
    } while (value);
  }
  static void put(std::string& out, uint64_t value, size_t bytes)
  {
    for (size_t i = 0; i < bytes; ++i)
      out.push_back(static_cast<char>(value >> (8 * i)));
  }

  go::PclntabLayout layout_;
  uint64_t text_;
  std::vector<SyntheticGoFunction> functions_;
};

} // namespace flamebpf::testing
