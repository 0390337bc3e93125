#include <algorithm>
#include <cstdio>
#include <elf.h>
#include <fcntl.h>
#include <filesystem>
#include <gtest/gtest.h>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "common/elf_reader.h"
#include "common/unique_fd.h"
#include "test_support.h"
#include "unwind/cfi_table.h"

namespace flamebpf::unwind {
namespace {

// ---- The oracle: binutils' readelf --debug-dump=frames-interp ----

// The rules readelf prints for one address range.
struct OracleRow {
  uint64_t address = 0;
  std::string cfa; // "rsp+8", "rbp+16", "exp", ...
  std::string fp;  // rbp's column: "u", "s", "c-16", "r3", ...; "" if the column is absent
  std::string ra;  // the return address's column
};

struct OracleFde {
  uint64_t start = 0;
  uint64_t end = 0;
  bool signal_frame = false; // its CIE's augmentation has 'S'
  std::vector<OracleRow> rows;
};

std::string run_readelf(const std::string& path)
{
  std::string command = "readelf --wide --debug-dump=frames-interp '" + path + "' 2>/dev/null";
  std::string output;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe)
    return output;
  char buffer[65536];
  size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0)
    output.append(buffer, got);
  ::pclose(pipe);
  return output;
}

// The FDEs readelf reads from path, each with its rows; an FDE that prints no rows has its CIE's.
std::vector<OracleFde> oracle_fdes(const std::string& path)
{
  static const std::regex cie_line(R"(^([0-9a-f]+) [0-9a-f]+ [0-9a-f]+ CIE \"([^\"]*)\".*)");
  static const std::regex fde_line(
      R"(^([0-9a-f]+) [0-9a-f]+ [0-9a-f]+ FDE cie=([0-9a-f]+) pc=([0-9a-f]+)\.\.([0-9a-f]+).*)");
  static const std::regex register_name(R"( \([a-z0-9]+\))");
  struct OracleCie {
    bool signal_frame = false;
    std::vector<OracleRow> rows;
  };
  std::map<uint64_t, OracleCie> cies;
  std::vector<OracleFde> fdes;
  std::vector<OracleRow>* rows = nullptr;
  std::vector<std::string> columns;
  std::istringstream lines(run_readelf(path));
  std::string line;
  std::smatch match;
  while (std::getline(lines, line)) {
    if (std::regex_match(line, match, cie_line)) {
      OracleCie& cie = cies[std::stoull(match[1], nullptr, 16)];
      cie.signal_frame = match[2].str().find('S') != std::string::npos;
      rows = &cie.rows;
      continue;
    }
    if (std::regex_match(line, match, fde_line)) {
      OracleFde fde;
      const OracleCie& cie = cies[std::stoull(match[2], nullptr, 16)];
      fde.start = std::stoull(match[3], nullptr, 16);
      fde.end = std::stoull(match[4], nullptr, 16);
      fde.signal_frame = cie.signal_frame;
      for (OracleRow row : cie.rows) {
        row.address = fde.start;
        fde.rows.push_back(row);
      }
      fdes.push_back(fde);
      rows = &fdes.back().rows;
      continue;
    }
    std::istringstream words(std::regex_replace(line, register_name, ""));
    std::vector<std::string> fields;
    for (std::string word; words >> word;)
      fields.push_back(word);
    if (fields.empty() || !rows)
      continue;
    if (fields[0] == "LOC") {
      columns = fields;
      continue;
    }
    if (fields.size() != columns.size() || fields[0].size() != 16)
      continue;
    OracleRow row;
    row.address = std::stoull(fields[0], nullptr, 16);
    for (size_t i = 1; i < fields.size(); ++i) {
      if (columns[i] == "CFA")
        row.cfa = fields[i];
      else if (columns[i] == "rbp")
        row.fp = fields[i];
      else if (columns[i] == "ra")
        row.ra = fields[i];
    }
    // An FDE's own rows replace its CIE's.
    if (rows->size() == 1 && rows->front().address == row.address)
      rows->clear();
    rows->push_back(row);
  }
  return fdes;
}

// The row we expect for an oracle row: the kind, and for CFA rows the offset and the saved frame
// pointer's slot. A CFA expression may be a PLT entry or fall back: kind_alternative.
struct Expected {
  uint8_t kind = FB_UNWIND_FRAME_POINTER;
  uint8_t kind_alternative = FB_UNWIND_FRAME_POINTER;
  int16_t cfa_offset = 0;
  int8_t fp_offset_words = 0;
};

Expected expected_for(const OracleFde& fde, const OracleRow& row)
{
  Expected expected;
  if (fde.signal_frame) {
    expected.kind = expected.kind_alternative = FB_UNWIND_SIGNAL;
    return expected;
  }
  if (row.ra == "u") {
    expected.kind = expected.kind_alternative = FB_UNWIND_STOP;
    return expected;
  }
  if (row.cfa == "exp") {
    expected.kind = FB_UNWIND_PLT;
    return expected;
  }
  static const std::regex cfa_rule(R"((rsp|rbp)\+(-?[0-9]+))");
  std::smatch match;
  if (!std::regex_match(row.cfa, match, cfa_rule) || (row.ra != "c-8" && !row.ra.empty()))
    return expected;
  long offset = std::stol(match[2]);
  if (offset < -32768 || offset > 32767)
    return expected;
  int8_t fp_words = 0;
  if (row.fp.starts_with("c")) {
    long fp = std::stol(row.fp.substr(1));
    if (fp % 8 != 0)
      return expected;
    fp_words = static_cast<int8_t>(fp / 8);
  } else if (row.fp != "u" && row.fp != "s" && !row.fp.empty()) {
    return expected; // in another register, or a value rule
  }
  expected.kind = expected.kind_alternative =
      match[1] == "rsp" ? FB_UNWIND_CFA_SP : FB_UNWIND_CFA_FP;
  expected.cfa_offset = static_cast<int16_t>(offset);
  expected.fp_offset_words = fp_words;
  return expected;
}

// The row of table that holds at address.
std::optional<fb_unwind_row> row_at(const UnwindTable& table, uint64_t address)
{
  if (address < table.base_address || table.rows.empty())
    return std::nullopt;
  uint64_t offset = address - table.base_address;
  auto next = std::upper_bound(
      table.rows.begin(), table.rows.end(), offset,
      [](uint64_t value, const fb_unwind_row& row) { return value < row.pc_offset; });
  if (next == table.rows.begin())
    return std::nullopt;
  return *(next - 1);
}

Result<CfiTable> table_of(const std::string& path)
{
  auto elf = testing::open_elf(path);
  if (!elf)
    return fail(elf.error());
  return build_cfi_table(elf->reader);
}

// Checks the table built from path against readelf at the first and the last byte of every row
// readelf prints; returns the addresses checked.
size_t expect_agrees_with_readelf(const std::string& path)
{
  auto built = table_of(path);
  EXPECT_TRUE(built.has_value()) << (built ? "" : built.error().message);
  if (!built)
    return 0;
  const UnwindTable& table = built->table;
  EXPECT_EQ(table.rows.back().kind, FB_UNWIND_FRAME_POINTER);
  for (size_t i = 1; i < table.rows.size(); ++i)
    EXPECT_LT(table.rows[i - 1].pc_offset, table.rows[i].pc_offset) << path << " row " << i;

  std::vector<OracleFde> fdes = oracle_fdes(path);
  EXPECT_GT(fdes.size(), 0u) << path;
  std::sort(fdes.begin(), fdes.end(),
            [](const OracleFde& a, const OracleFde& b) { return a.start < b.start; });
  size_t checked = 0;
  uint64_t covered = 0;
  for (const OracleFde& fde : fdes) {
    if (fde.start == fde.end || fde.start < covered)
      continue; // empty, or overlapping (the builder keeps the first)
    covered = fde.end;
    for (size_t i = 0; i < fde.rows.size(); ++i) {
      const OracleRow& rule = fde.rows[i];
      uint64_t last = (i + 1 < fde.rows.size() ? fde.rows[i + 1].address : fde.end) - 1;
      Expected expected = expected_for(fde, rule);
      for (uint64_t address : {rule.address, last}) {
        if (address < rule.address)
          continue; // readelf printed two rows at one address
        auto row = row_at(table, address);
        EXPECT_TRUE(row.has_value()) << path << std::hex << " at 0x" << address;
        if (!row)
          continue;
        EXPECT_TRUE(row->kind == expected.kind || row->kind == expected.kind_alternative)
            << path << std::hex << " at 0x" << address << std::dec << ": CFA " << rule.cfa
            << " rbp " << rule.fp << " ra " << rule.ra << ", kind " << int{row->kind};
        if (row->kind == FB_UNWIND_CFA_SP || row->kind == FB_UNWIND_CFA_FP) {
          EXPECT_EQ(row->cfa_offset, expected.cfa_offset)
              << path << std::hex << " at 0x" << address << std::dec << ": CFA " << rule.cfa;
          EXPECT_EQ(row->fp_offset_words, expected.fp_offset_words)
              << path << std::hex << " at 0x" << address << std::dec << ": rbp " << rule.fp;
        }
        ++checked;
      }
    }
    // Just past the FDE, unless another starts there: the frame pointer.
    auto after = row_at(table, fde.end);
    bool next_starts = std::any_of(fdes.begin(), fdes.end(), [&](const OracleFde& other) {
      return other.start == fde.end && other.end > other.start;
    });
    if (!next_starts && after) {
      EXPECT_EQ(after->kind, FB_UNWIND_FRAME_POINTER) << path << std::hex << " at 0x" << fde.end;
    }
  }
  return checked;
}

TEST(CfiTableOracle, FixtureWithoutFramePointers)
{
  EXPECT_GT(expect_agrees_with_readelf(FLAMEBPF_UNWIND_FIXTURE_NO_FP), 20u);
}

TEST(CfiTableOracle, FixtureWithFramePointers)
{
  EXPECT_GT(expect_agrees_with_readelf(FLAMEBPF_UNWIND_FIXTURE_FP), 20u);
}

TEST(CfiTableOracle, FixtureWithOnlyDebugFrame)
{
  auto built = table_of(FLAMEBPF_UNWIND_FIXTURE_DEBUG_FRAME);
  ASSERT_TRUE(built.has_value());
  EXPECT_EQ(built->section, ".debug_frame");
  EXPECT_GT(expect_agrees_with_readelf(FLAMEBPF_UNWIND_FIXTURE_DEBUG_FRAME), 20u);
}

TEST(CfiTableOracle, SystemLibc)
{
  const char* libc = "/lib/x86_64-linux-gnu/libc.so.6";
  ASSERT_TRUE(std::filesystem::exists(libc)) << "the tests run on Debian x86-64";
  EXPECT_GT(expect_agrees_with_readelf(libc), 10000u);
}

// The fixture's hand-written rules, each mapped to its kind.
TEST(CfiTable, FixtureRulesMapToTheirKinds)
{
  auto built = table_of(FLAMEBPF_UNWIND_FIXTURE_NO_FP);
  ASSERT_TRUE(built.has_value());
  EXPECT_EQ(built->section, ".eh_frame");
  std::vector<uint8_t> kinds;
  for (const fb_unwind_row& row : built->table.rows)
    kinds.push_back(row.kind);
  for (uint8_t kind : {FB_UNWIND_CFA_SP, FB_UNWIND_CFA_FP, FB_UNWIND_PLT, FB_UNWIND_SIGNAL,
                       FB_UNWIND_STOP, FB_UNWIND_FRAME_POINTER})
    EXPECT_NE(std::find(kinds.begin(), kinds.end(), kind), kinds.end()) << int{kind};
  // fb_frames_big's 70000-byte frame, the CFA expression and rbp saved in rbx.
  EXPECT_GE(built->counts.rows_frame_pointer, 3u);
  EXPECT_EQ(built->counts.fdes_malformed, 0u);
  EXPECT_GT(built->counts.fdes, 5u);
}

TEST(CfiTable, OnlyX86_64FilesAreUnwound)
{
  auto built = table_of(FLAMEBPF_ELF_FIXTURE_PLAIN32);
  ASSERT_FALSE(built.has_value());
  EXPECT_NE(built.error().message.find("not an x86-64 file"), std::string::npos)
      << built.error().message;
}

// ---- Hand-written sections ----

// Little-endian bytes of a CFI section, written by hand.
class Bytes {
public:
  Bytes& u8(uint8_t value)
  {
    bytes_.push_back(static_cast<char>(value));
    return *this;
  }
  Bytes& u32(uint32_t value)
  {
    for (int i = 0; i < 4; ++i)
      u8(static_cast<uint8_t>(value >> (8 * i)));
    return *this;
  }
  Bytes& raw(std::initializer_list<uint8_t> values)
  {
    for (uint8_t value : values)
      u8(value);
    return *this;
  }
  Bytes& text(std::string_view value)
  {
    bytes_.append(value);
    bytes_.push_back('\0');
    return *this;
  }
  size_t size() const { return bytes_.size(); }
  const std::string& str() const { return bytes_; }

private:
  std::string bytes_;
};

// A CIE "zR" (pcrel sdata4 addresses), CFA = rsp + 8, return address at CFA - 8; augmentation
// as given ("zR" or "zRS").
void add_cie(Bytes& section, std::string_view augmentation = "zR")
{
  Bytes body;
  body.u32(0).u8(1).text(augmentation).u8(1).u8(0x78).u8(16).u8(1).u8(0x1b);
  body.raw({0x0c, 7, 8, 0x90, 1}); // def_cfa rsp 8; offset r16 at cfa-8
  while ((body.size() + 4) % 8)
    body.u8(0);
  section.u32(static_cast<uint32_t>(body.size()));
  for (char c : body.str())
    section.u8(static_cast<uint8_t>(c));
}

// An FDE for [start, start + length) of the CIE at cie_offset, with instructions.
void add_fde(Bytes& section,
             uint64_t section_address,
             size_t cie_offset,
             uint64_t start,
             uint32_t length,
             std::initializer_list<uint8_t> instructions)
{
  size_t at = section.size();
  Bytes body;
  body.u32(static_cast<uint32_t>(at + 4 - cie_offset));
  uint64_t field = section_address + at + 8;
  body.u32(static_cast<uint32_t>(start - field));
  body.u32(length);
  body.u8(0); // no augmentation data
  body.raw(instructions);
  section.u32(static_cast<uint32_t>(body.size()));
  for (char c : body.str())
    section.u8(static_cast<uint8_t>(c));
}

constexpr uint64_t kSectionAddress = 0x2000;
constexpr uint64_t kCode = 0x1000;

Result<CfiTable> build(const Bytes& section, uint64_t code_end = kCode + 0x1000)
{
  CfiSection cfi;
  cfi.bytes = section.str();
  cfi.address = kSectionAddress;
  cfi.code_start = kCode;
  cfi.code_end = code_end;
  return build_cfi_table(cfi);
}

std::vector<std::tuple<uint32_t, int, int, int>> rows_of(const CfiTable& table)
{
  std::vector<std::tuple<uint32_t, int, int, int>> rows;
  for (const fb_unwind_row& row : table.table.rows)
    rows.emplace_back(row.pc_offset, row.kind, row.cfa_offset, row.fp_offset_words);
  return rows;
}

using Rows = std::vector<std::tuple<uint32_t, int, int, int>>;

TEST(CfiTable, PushFrameRowsGapsAndMerges)
{
  Bytes section;
  add_cie(section);
  // push rbp; mov rsp, rbp; ...; pop rbp: the classic frame.
  add_fde(section, kSectionAddress, 0, kCode + 0x10, 0x20,
          {0x41, 0x0e, 16, 0x86, 2, 0x43, 0x0d, 6, 0x58, 0x0c, 7, 8});
  // Adjacent to the first, its rows equal to the first's last: merged.
  add_fde(section, kSectionAddress, 0, kCode + 0x30, 0x10, {});
  // After a gap.
  add_fde(section, kSectionAddress, 0, kCode + 0x80, 0x8, {0x42, 0x0e, 24});
  auto built = build(section);
  ASSERT_TRUE(built.has_value()) << built.error().message;
  EXPECT_EQ(built->table.base_address, kCode);
  EXPECT_EQ(rows_of(*built), (Rows{
                                 {0x00, FB_UNWIND_FRAME_POINTER, 0, 0},
                                 {0x10, FB_UNWIND_CFA_SP, 8, 0},
                                 {0x11, FB_UNWIND_CFA_SP, 16, -2},
                                 {0x14, FB_UNWIND_CFA_FP, 16, -2},
                                 {0x2c, FB_UNWIND_CFA_SP, 8, -2},
                                 {0x30, FB_UNWIND_CFA_SP, 8, 0},
                                 {0x40, FB_UNWIND_FRAME_POINTER, 0, 0},
                                 {0x80, FB_UNWIND_CFA_SP, 8, 0},
                                 {0x82, FB_UNWIND_CFA_SP, 24, 0},
                                 {0x88, FB_UNWIND_FRAME_POINTER, 0, 0},
                             }));
  EXPECT_EQ(built->counts.fdes, 3u);
  EXPECT_EQ(built->counts.fdes_malformed, 0u);
}

TEST(CfiTable, SpecialRules)
{
  Bytes section;
  add_cie(section);
  size_t signal_cie = section.size();
  add_cie(section, "zRS");
  // The outermost frame.
  add_fde(section, kSectionAddress, 0, kCode, 0x10, {0x07, 16});
  // GCC's PLT expression, then another expression.
  add_fde(section, kSectionAddress, 0, kCode + 0x10, 0x10,
          {0x0f, 11, 0x77, 8, 0x80, 0, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22, 0x48, 0x0f, 2,
           0x77, 0x08});
  // A signal frame.
  add_fde(section, kSectionAddress, signal_cie, kCode + 0x20, 0x10, {});
  // A CFA past 16 bits, then in rbx.
  add_fde(section, kSectionAddress, 0, kCode + 0x30, 0x10,
          {0x0e, 0x80, 0x80, 0x04, 0x44, 0x0c, 3, 8});
  auto built = build(section);
  ASSERT_TRUE(built.has_value()) << built.error().message;
  EXPECT_EQ(rows_of(*built), (Rows{
                                 {0x00, FB_UNWIND_STOP, 0, 0},
                                 {0x10, FB_UNWIND_PLT, 0, 0},
                                 {0x18, FB_UNWIND_FRAME_POINTER, 0, 0},
                                 {0x20, FB_UNWIND_SIGNAL, 0, 0},
                                 {0x30, FB_UNWIND_FRAME_POINTER, 0, 0},
                             }));
  // The second expression, the CFA past 16 bits and the CFA in rbx.
  EXPECT_EQ(built->counts.rows_frame_pointer, 3u);
}

TEST(CfiTable, RememberedStatesAreBounded)
{
  Bytes section;
  add_cie(section);
  // Remembered and restored: fine.
  add_fde(section, kSectionAddress, 0, kCode, 0x10, {0x0a, 0x0e, 16, 0x41, 0x0b});
  // 17 deep: malformed, its range falls back to the frame pointer.
  add_fde(section, kSectionAddress, 0, kCode + 0x10, 0x10,
          {0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a,
           0x0a, 0x0a});
  // Restored with nothing remembered: malformed.
  add_fde(section, kSectionAddress, 0, kCode + 0x20, 0x10, {0x0b});
  // An unknown opcode: malformed.
  add_fde(section, kSectionAddress, 0, kCode + 0x30, 0x10, {0x3f});
  auto built = build(section);
  ASSERT_TRUE(built.has_value()) << built.error().message;
  EXPECT_EQ(rows_of(*built), (Rows{
                                 {0x00, FB_UNWIND_CFA_SP, 16, 0},
                                 {0x01, FB_UNWIND_CFA_SP, 8, 0},
                                 {0x10, FB_UNWIND_FRAME_POINTER, 0, 0},
                             }));
  EXPECT_EQ(built->counts.fdes_malformed, 3u);
}

TEST(CfiTable, MalformedEntriesCostOnlyThemselves)
{
  Bytes section;
  add_cie(section);
  // Its CIE pointer leads into the middle of the CIE.
  add_fde(section, kSectionAddress, 3, kCode, 0x10, {});
  // Its CIE pointer leads before the section.
  section.u32(12).raw({0, 0x10, 0, 0}).u32(0).u32(0);
  // Outside the code.
  add_fde(section, kSectionAddress, 0, kCode + 0x2000, 0x10, {});
  // Overlapping the next one, which comes first in address order.
  add_fde(section, kSectionAddress, 0, kCode + 0x48, 0x10, {});
  add_fde(section, kSectionAddress, 0, kCode + 0x40, 0x10, {0x41, 0x0e, 16});
  // A length past the section's end: nothing after it is read.
  section.u32(0x7fffffff).u32(0);
  auto built = build(section);
  ASSERT_TRUE(built.has_value()) << built.error().message;
  EXPECT_EQ(rows_of(*built), (Rows{
                                 {0x00, FB_UNWIND_FRAME_POINTER, 0, 0},
                                 {0x40, FB_UNWIND_CFA_SP, 8, 0},
                                 {0x41, FB_UNWIND_CFA_SP, 16, 0},
                                 {0x50, FB_UNWIND_FRAME_POINTER, 0, 0},
                             }));
  EXPECT_EQ(built->counts.fdes, 6u);           // five, and the entry whose length runs past the end
  EXPECT_EQ(built->counts.fdes_malformed, 3u); // two CIE pointers and the length
  EXPECT_EQ(built->counts.fdes_dropped, 2u);   // outside the code, overlapping
}

TEST(CfiTable, RowsAreCapped)
{
  // FDEs of 4 bytes each 8 bytes apart: two rows each (its own and the gap's), more than the cap.
  Bytes section;
  add_cie(section);
  size_t fdes = kMaxCfiRows / 2 + 1000;
  for (size_t i = 0; i < fdes; ++i)
    add_fde(section, kSectionAddress, 0, kCode + 8 * i, 4, {});
  auto built = build(section, kCode + 8 * fdes);
  ASSERT_TRUE(built.has_value()) << built.error().message;
  const auto& rows = built->table.rows;
  EXPECT_LE(rows.size(), kMaxCfiRows);
  EXPECT_GT(rows.size(), kMaxCfiRows - 4);
  EXPECT_EQ(rows.back().kind, FB_UNWIND_FRAME_POINTER);
  EXPECT_GE(built->counts.fdes_dropped, 1000u);
  EXPECT_EQ(built->counts.fdes_malformed, 0u);
}

TEST(CfiTable, EveryTruncationIsSafe)
{
  Bytes section;
  add_cie(section);
  add_fde(section, kSectionAddress, 0, kCode, 0x40,
          {0x41, 0x0e, 16, 0x86, 2, 0x43, 0x0d, 6, 0x0a, 0x58, 0x0c, 7, 8, 0x0b});
  for (size_t length = 0; length <= section.size(); ++length) {
    CfiSection cfi;
    std::string cut = section.str().substr(0, length);
    cfi.bytes = cut;
    cfi.address = kSectionAddress;
    cfi.code_start = kCode;
    cfi.code_end = kCode + 0x1000;
    auto built = build_cfi_table(cfi);
    ASSERT_TRUE(built.has_value()) << length;
    ASSERT_FALSE(built->table.rows.empty());
    EXPECT_EQ(built->table.rows.back().kind, FB_UNWIND_FRAME_POINTER) << length;
    if (length < section.size())
      EXPECT_EQ(built->table.rows.size(), 1u) << length;
    else
      EXPECT_GT(built->table.rows.size(), 3u);
  }
}

TEST(CfiTable, CodeOverFourGibIsRefused)
{
  // A CIE whose FDEs hold absolute 8-byte addresses (udata8), and two FDEs 4 GiB apart.
  Bytes section;
  section.u32(16).u32(0).u8(1).text("zR").u8(1).u8(0x78).u8(16).u8(1).u8(0x04).raw({0x0c, 7, 8});
  for (uint64_t start : {uint64_t{0x1000}, uint64_t{0x1000 + (1ULL << 32)}}) {
    size_t at = section.size();
    section.u32(21).u32(static_cast<uint32_t>(at + 4));
    for (int i = 0; i < 8; ++i)
      section.u8(static_cast<uint8_t>(start >> (8 * i)));
    section.u32(0x10).u32(0).u8(0);
  }
  CfiSection cfi;
  cfi.bytes = section.str();
  cfi.address = kSectionAddress;
  auto built = build_cfi_table(cfi);
  EXPECT_FALSE(built.has_value());
  // Both FDEs within 4 GiB of code: the second is outside it, dropped.
  cfi.code_start = 0x1000;
  cfi.code_end = 0x1000 + (1ULL << 31);
  built = build_cfi_table(cfi);
  ASSERT_TRUE(built.has_value()) << built.error().message;
  EXPECT_EQ(built->counts.fdes, 2u);
  EXPECT_EQ(built->counts.fdes_dropped, 1u);
  EXPECT_EQ(rows_of(*built),
            (Rows{{0, FB_UNWIND_CFA_SP, 8, 0}, {0x10, FB_UNWIND_FRAME_POINTER, 0, 0}}));
  cfi.code_end = 0x1000 + (5ULL << 30);
  EXPECT_FALSE(build_cfi_table(cfi).has_value());
}

TEST(CfiTable, ContentKeyFollowsWhatTheTableDependsOn)
{
  Bytes section;
  add_cie(section);
  add_fde(section, kSectionAddress, 0, kCode, 0x10, {0x41, 0x0e, 16});
  CfiSection cfi;
  cfi.bytes = section.str();
  cfi.address = kSectionAddress;
  cfi.code_start = kCode;
  cfi.code_end = kCode + 0x1000;
  uint64_t key = build_cfi_table(cfi)->content_key;
  EXPECT_EQ(build_cfi_table(cfi)->content_key, key);
  CfiSection moved = cfi;
  moved.address += 0x1000;
  EXPECT_NE(build_cfi_table(moved)->content_key, key);
  CfiSection shifted = cfi;
  shifted.code_start -= 0x10;
  EXPECT_NE(build_cfi_table(shifted)->content_key, key);
  // Where the file's segments lie decides each mapping's load bias.
  std::vector<ElfSegment> segments{ElfSegment{PT_LOAD, PF_R | PF_X, 0, kCode, 0x1000, 0x1000}};
  CfiSection laid_out = cfi;
  laid_out.load_segments = &segments;
  uint64_t laid_out_key = build_cfi_table(laid_out)->content_key;
  EXPECT_NE(laid_out_key, key);
  segments[0].offset = 0x1000;
  EXPECT_NE(build_cfi_table(laid_out)->content_key, laid_out_key);
  std::string changed = section.str();
  changed.back() ^= 1;
  CfiSection garbage = cfi;
  garbage.bytes = changed;
  EXPECT_NE(build_cfi_table(garbage)->content_key, key);
}

} // namespace
} // namespace flamebpf::unwind
