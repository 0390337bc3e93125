// The inline index against binutils' addr2line (an independent DWARF reader) on the inline_spinner
// variants and on glibc's debug file, and against hand-made hostile DWARF.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <elf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>
#include <zlib.h>

#include "common/elf_reader.h"
#include "common/unique_fd.h"
#include "symbolize/dwarf_inlines.h"
#include "symbolize/synthetic_elf.h"

namespace flamebpf::symbolize {
namespace {

using Chain = std::vector<std::string>;

struct OpenedElf {
  UniqueFd fd;
  std::optional<ElfReader> reader;
};

OpenedElf open_elf(const std::string& path)
{
  OpenedElf opened{UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC)), std::nullopt};
  struct stat status {};
  if (!opened.fd.valid() || fstat(opened.fd.get(), &status) != 0)
    return opened;
  auto reader = ElfReader::open(ElfBytes::file(opened.fd.get(), status.st_size), path);
  if (reader)
    opened.reader.emplace(std::move(*reader));
  return opened;
}

std::string spinner(const std::string& name)
{
  return std::string(INLINE_SPINNERS_DIR) + "/" + name;
}

// The value and size of the first function symbol whose name contains part, from .symtab.
std::pair<uint64_t, uint64_t> function_symbol(const ElfReader& reader, const std::string& part)
{
  const ElfSection* symtab = reader.section_of_type(SHT_SYMTAB);
  if (!symtab || symtab->link >= reader.sections().size())
    return {0, 0};
  auto names = reader.read_section(reader.sections()[symtab->link], 16 << 20);
  if (!names)
    return {0, 0};
  std::pair<uint64_t, uint64_t> found{0, 0};
  auto read = reader.read_symbols(*symtab, 64 << 20, [&](const ElfSymbolEntry& entry) {
    if (entry.type != STT_FUNC || found.second != 0 || entry.name >= names->bytes.size())
      return;
    std::string name(names->bytes.c_str() + entry.name);
    if (name.find(part) != std::string::npos)
      found = {entry.value, entry.size};
  });
  EXPECT_TRUE(read.has_value());
  return found;
}

// addr2line's inlined chains at addresses (outermost first, the real function left out), read
// in one run: -a marks where each address's answer starts, -i lists its inlined callers
// innermost first, -f names the functions, -C demangles.
std::vector<Chain> addr2line_chains(const std::string& file, const std::vector<uint64_t>& addresses)
{
  char input_path[] = "/tmp/dwarf-inlines-addresses.XXXXXX";
  int input = mkstemp(input_path);
  EXPECT_GE(input, 0);
  std::string text;
  for (uint64_t address : addresses) {
    char line[32];
    std::snprintf(line, sizeof line, "%llx\n", static_cast<unsigned long long>(address));
    text += line;
  }
  EXPECT_EQ(write(input, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(input);
  std::string command = "addr2line -a -i -f -C -e '" + file + "' < " + input_path;
  FILE* output = popen(command.c_str(), "r");
  EXPECT_NE(output, nullptr);
  std::vector<Chain> chains;
  Chain frames; // innermost first, function names only
  auto close_chain = [&] {
    if (frames.empty())
      return;
    std::reverse(frames.begin(), frames.end());
    frames.erase(frames.begin()); // the real function
    chains.push_back(frames);
    frames.clear();
  };
  char* line = nullptr;
  size_t capacity = 0;
  bool function_line = false;
  bool started = false;
  ssize_t length;
  while ((length = getline(&line, &capacity, output)) > 0) {
    std::string entry(line, static_cast<size_t>(length));
    if (!entry.empty() && entry.back() == '\n')
      entry.pop_back();
    if (entry.starts_with("0x")) {
      if (started)
        close_chain();
      started = true;
      function_line = true;
      continue;
    }
    if (function_line)
      frames.push_back(entry);
    function_line = !function_line;
  }
  if (started)
    close_chain();
  free(line);
  pclose(output);
  unlink(input_path);
  return chains;
}

Chain chain_at(const InlineIndex& index, uint64_t address)
{
  Chain chain;
  for (const auto& inlined : index.at(address))
    chain.emplace_back(inlined.name);
  return chain;
}

std::string joined(const Chain& chain)
{
  std::string text;
  for (const auto& name : chain)
    text += (text.empty() ? "" : " > ") + name;
  return "[" + text + "]";
}

// Every byte of outer_work in binary (from its .symtab), with DWARF read from dwarf_file.
void expect_outer_work_as_addr2line(const std::string& binary, const std::string& dwarf_file)
{
  auto code = open_elf(binary);
  ASSERT_TRUE(code.reader) << binary;
  auto [begin, size] = function_symbol(*code.reader, "outer_work");
  ASSERT_GT(size, 0u) << "no outer_work in " << binary;

  auto dwarf = open_elf(dwarf_file);
  ASSERT_TRUE(dwarf.reader) << dwarf_file;
  std::vector<std::string> problems;
  auto index = InlineIndex::build(*dwarf.reader, 0, problems);
  ASSERT_TRUE(index) << index.error().message;
  EXPECT_TRUE(problems.empty()) << problems.front();

  std::vector<uint64_t> addresses;
  for (uint64_t address = begin; address < begin + size; ++address)
    addresses.push_back(address);
  auto expected = addr2line_chains(dwarf_file, addresses);
  ASSERT_EQ(expected.size(), addresses.size());
  size_t nested = 0;
  for (size_t i = 0; i < addresses.size(); ++i) {
    Chain got = chain_at(**index, addresses[i]);
    EXPECT_EQ(got, expected[i]) << std::hex << "at 0x" << addresses[i] << ": " << joined(got)
                                << " against addr2line's " << joined(expected[i]);
    if (got.size() == 2 && got[0].find("middle_step") != std::string::npos &&
        got[1].find("leaf_mix") != std::string::npos)
      ++nested;
  }
  // Not only empty chains agreeing: the hot loop is leaf_mix inlined in middle_step.
  EXPECT_GT(nested, 8u) << dwarf_file;
}

TEST(DwarfInlinesFixture, GccDwarf5AgreesWithAddr2line)
{
  expect_outer_work_as_addr2line(spinner("gcc-dwarf5"), spinner("gcc-dwarf5"));
}

TEST(DwarfInlinesFixture, GccDwarf4AgreesWithAddr2line)
{
  expect_outer_work_as_addr2line(spinner("gcc-dwarf4"), spinner("gcc-dwarf4"));
}

TEST(DwarfInlinesFixture, ClangDwarf5AgreesWithAddr2line)
{
  expect_outer_work_as_addr2line(spinner("clang-dwarf5"), spinner("clang-dwarf5"));
}

TEST(DwarfInlinesFixture, CppAgreesWithAddr2line)
{
  expect_outer_work_as_addr2line(spinner("gcc-cpp"), spinner("gcc-cpp"));
  auto file = open_elf(spinner("gcc-cpp"));
  ASSERT_TRUE(file.reader);
  std::vector<std::string> problems;
  auto index = InlineIndex::build(*file.reader, 0, problems);
  ASSERT_TRUE(index);
  auto [begin, size] = function_symbol(*file.reader, "outer_work");
  bool demangled = false;
  for (uint64_t address = begin; address < begin + size; ++address) {
    for (const auto& inlined : (*index)->at(address))
      demangled |= inlined.name.find("spinner::leaf_mix<unsigned long>") != std::string::npos;
  }
  EXPECT_TRUE(demangled);
}

TEST(DwarfInlinesFixture, ABuildCalledOffEndsBeforeItsFirstUnitAndOneNotCalledOffIsWhole)
{
  auto file = open_elf(spinner("gcc-cpp"));
  ASSERT_TRUE(file.reader);
  std::vector<std::string> problems;
  std::atomic<bool> cancelled = true;
  auto called_off = InlineIndex::build(*file.reader, 0, problems, kMaxInlineBuildBytes, &cancelled);
  ASSERT_FALSE(called_off);
  EXPECT_NE(called_off.error().message.find("called off"), std::string::npos)
      << called_off.error().message;
  cancelled = false;
  auto whole = InlineIndex::build(*file.reader, 0, problems, kMaxInlineBuildBytes, &cancelled);
  ASSERT_TRUE(whole) << whole.error().message;
  auto [begin, size] = function_symbol(*file.reader, "outer_work");
  size_t inlined = 0;
  for (uint64_t address = begin; address < begin + size; ++address)
    inlined += (*whole)->at(address).size();
  EXPECT_GT(inlined, 0u);
}

TEST(DwarfInlinesFixture, DebugFileAgreesWithAddr2line)
{
  expect_outer_work_as_addr2line(spinner("gcc-dwarf5"), spinner("gcc-dwarf5.debug"));
}

TEST(DwarfInlinesFixture, ZlibCompressedDebugFileAgreesWithAddr2line)
{
  auto file = open_elf(spinner("gcc-dwarf5.zdebug"));
  ASSERT_TRUE(file.reader);
  const ElfSection* info = file.reader->section_named(".debug_info");
  ASSERT_NE(info, nullptr);
  ASSERT_TRUE(info->flags & SHF_COMPRESSED) << "the fixture is not compressed";
  expect_outer_work_as_addr2line(spinner("gcc-dwarf5"), spinner("gcc-dwarf5.zdebug"));
}

TEST(DwarfInlinesFixture, StrippedFileHasNoIndex)
{
  auto file = open_elf(spinner("gcc-dwarf5.stripped"));
  ASSERT_TRUE(file.reader);
  std::vector<std::string> problems;
  auto index = InlineIndex::build(*file.reader, 0, problems);
  ASSERT_FALSE(index);
  EXPECT_NE(index.error().message.find("gcc-dwarf5.stripped"), std::string::npos)
      << index.error().message;
}

TEST(DwarfInlinesFixture, BiasMovesEveryRange)
{
  auto file = open_elf(spinner("gcc-dwarf5"));
  ASSERT_TRUE(file.reader);
  auto [begin, size] = function_symbol(*file.reader, "outer_work");
  std::vector<std::string> problems;
  auto plain = InlineIndex::build(*file.reader, 0, problems);
  auto moved = InlineIndex::build(*file.reader, 0x100000, problems);
  ASSERT_TRUE(plain && moved);
  size_t compared = 0;
  for (uint64_t address = begin; address < begin + size; ++address) {
    EXPECT_EQ(chain_at(**plain, address), chain_at(**moved, address + 0x100000));
    compared += !chain_at(**plain, address).empty();
  }
  EXPECT_GT(compared, 0u);
}

// The debug file of this machine's libc.so.6, by its build ID; "" if libc6-dbg is absent.
std::string libc_debug_file(std::string& libc)
{
  for (const char* candidate :
       {"/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6",
        "/usr/lib/x86_64-linux-gnu/libc.so.6"}) {
    if (access(candidate, R_OK) == 0) {
      libc = candidate;
      break;
    }
  }
  auto file = open_elf(libc);
  if (!file.reader)
    return {};
  std::string id = file.reader->build_id();
  if (id.size() < 2)
    return {};
  std::string hex;
  for (unsigned char byte : id) {
    char digits[3];
    std::snprintf(digits, sizeof digits, "%02x", byte);
    hex += digits;
  }
  std::string path =
      "/usr/lib/debug/.build-id/" + hex.substr(0, 2) + "/" + hex.substr(2) + ".debug";
  return access(path.c_str(), R_OK) == 0 ? path : std::string();
}

uint64_t first_load_vaddr(const ElfReader& reader)
{
  for (const auto& segment : reader.segments()) {
    if (segment.type == PT_LOAD)
      return segment.vaddr;
  }
  return 0;
}

TEST(DwarfInlinesCorpus, GlibcAgreesWithAddr2line)
{
  std::string libc;
  std::string debug = libc_debug_file(libc);
  if (debug.empty())
    GTEST_SKIP() << "no debug file of " << libc << " (install libc6-dbg)";
  auto code = open_elf(libc);
  auto dwarf = open_elf(debug);
  ASSERT_TRUE(code.reader && dwarf.reader);
  const ElfSection* text = code.reader->section_named(".text");
  ASSERT_NE(text, nullptr);

  std::vector<std::string> problems;
  auto started = std::chrono::steady_clock::now();
  auto index = InlineIndex::build(
      *dwarf.reader, first_load_vaddr(*code.reader) - first_load_vaddr(*dwarf.reader), problems);
  double build_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  ASSERT_TRUE(index) << index.error().message;
  for (const auto& problem : problems)
    std::printf("[ PROBLEM  ] %s\n", problem.c_str());

  std::vector<uint64_t> addresses;
  for (uint64_t address = text->address;
       address < text->address + text->size && addresses.size() < 20000; address += 61)
    addresses.push_back(address);
  auto expected = addr2line_chains(debug, addresses);
  ASSERT_EQ(expected.size(), addresses.size());

  started = std::chrono::steady_clock::now();
  std::vector<Chain> got;
  got.reserve(addresses.size());
  for (uint64_t address : addresses)
    got.push_back(chain_at(**index, address));
  double lookup_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - started)
          .count() /
      static_cast<double>(addresses.size());

  size_t agreed = 0;
  size_t inlined = 0;
  std::string mismatches;
  for (size_t i = 0; i < addresses.size(); ++i) {
    inlined += !expected[i].empty();
    if (got[i] == expected[i]) {
      ++agreed;
      continue;
    }
    char address[32];
    std::snprintf(address, sizeof address, "0x%llx", static_cast<unsigned long long>(addresses[i]));
    mismatches += std::string("  ") + address + ": " + joined(got[i]) + " against addr2line's " +
                  joined(expected[i]) + "\n";
  }
  double agreement = 100.0 * static_cast<double>(agreed) / static_cast<double>(addresses.size());
  std::printf("[ FIGURES  ] glibc: built in %.1f ms, %zu ranges, %zu bytes held; %zu addresses "
              "(%zu in inlined code), %.2f %% agree with addr2line; %.2f us a lookup\n",
              build_ms, (*index)->ranges(), (*index)->memory_bytes(), addresses.size(), inlined,
              agreement, lookup_us);
  EXPECT_GT(inlined, addresses.size() / 20) << "too few inlined addresses to judge";
  EXPECT_GE(agreement, 99.0) << "mismatches:\n" << mismatches;
  EXPECT_LT((*index)->memory_bytes(), kMaxInlineIndexBytes);
}

// Hand-made DWARF for hostile input: little-endian bytes, LEB128.
void put(std::string& out, uint64_t value, size_t size)
{
  for (size_t i = 0; i < size; ++i)
    out.push_back(i < 8 ? static_cast<char>(value >> (8 * i)) : '\0');
}
void put_uleb(std::string& out, uint64_t value)
{
  do {
    uint8_t byte = value & 0x7f;
    value >>= 7;
    out.push_back(static_cast<char>(byte | (value ? 0x80 : 0)));
  } while (value);
}

// Abbreviation codes of the hand-made units.
enum : uint8_t {
  kCompileUnit = 1, // children; DW_AT_name string
  kFunction = 2,    // subprogram, children; name string, low_pc addr, high_pc data4
  kInlined = 3,     // inlined_subroutine, children; abstract_origin ref4, low_pc, high_pc data4
  kAbstract = 4,    // subprogram, no children; name string
  kIndirect = 5,    // inlined_subroutine, children; origin, low_pc, high_pc all DW_FORM_indirect
  kBlock = 6,       // lexical_block, children; nothing
  kLinked = 7,      // subprogram, no children; specification ref4
  kRanged = 8,      // inlined_subroutine, no children; abstract_origin ref4, ranges sec_offset
  kStrpNamed = 9,   // subprogram, no children; name strp
};

std::string abbreviations()
{
  std::string out;
  auto entry = [&](uint8_t code, uint32_t tag, bool children,
                   std::vector<std::pair<uint32_t, uint32_t>> specs) {
    put_uleb(out, code);
    put_uleb(out, tag);
    out.push_back(children ? 1 : 0);
    for (auto [name, form] : specs) {
      put_uleb(out, name);
      put_uleb(out, form);
    }
    out.append(2, '\0');
  };
  entry(kCompileUnit, 0x11, true, {{0x03, 0x08}});
  entry(kFunction, 0x2e, true, {{0x03, 0x08}, {0x11, 0x01}, {0x12, 0x06}});
  entry(kInlined, 0x1d, true, {{0x31, 0x13}, {0x11, 0x01}, {0x12, 0x06}});
  entry(kAbstract, 0x2e, false, {{0x03, 0x08}});
  entry(kIndirect, 0x1d, true, {{0x31, 0x16}, {0x11, 0x16}, {0x12, 0x16}});
  entry(kBlock, 0x0b, true, {});
  entry(kLinked, 0x2e, false, {{0x47, 0x13}});
  entry(kRanged, 0x1d, false, {{0x31, 0x13}, {0x55, 0x17}});
  entry(kStrpNamed, 0x2e, false, {{0x03, 0x0e}});
  out.push_back('\0');
  return out;
}

// A function "real" (0x1000, 0x100 bytes) with one inlined call (0x1010, 0x10 bytes) of origin,
// then the ends of the call's, the function's and the unit's children.
void append_real_calling(std::string& dies, uint32_t origin)
{
  dies.push_back(kFunction);
  dies += std::string("real") + '\0';
  put(dies, 0x1000, 8);
  put(dies, 0x100, 4);
  dies.push_back(kInlined);
  put(dies, origin, 4);
  put(dies, 0x1010, 8);
  put(dies, 0x10, 4);
  dies.append(3, '\0');
}

// A DWARF 4 unit (32-bit lengths, 8-byte addresses) around dies; offsets in dies are from the
// unit's start, whose header is 11 bytes.
constexpr uint32_t kHeaderBytes = 11;
std::string unit_v4(const std::string& dies)
{
  std::string out;
  put(out, dies.size() + 7, 4);
  put(out, 4, 2);
  put(out, 0, 4);
  out.push_back(8);
  return out + dies;
}

// The DIEs of a unit whose function real (at 0x1000, 0x100 bytes) inlined callee at 0x1010..0x1020;
// callee's abstract DIE is at the returned offset.
std::string simple_dies(uint32_t header_bytes = kHeaderBytes)
{
  std::string dies;
  dies.push_back(kCompileUnit);
  dies += std::string("unit.c") + '\0';
  uint32_t abstract = header_bytes + static_cast<uint32_t>(dies.size());
  dies.push_back(kAbstract);
  dies += std::string("callee") + '\0';
  append_real_calling(dies, abstract);
  return dies;
}

// SHF_COMPRESSED content: an Elf64_Chdr stating stated_size, then data deflated.
std::string
compressed(const std::string& data, uint64_t stated_size, uint32_t type = ELFCOMPRESS_ZLIB)
{
  Elf64_Chdr header{};
  header.ch_type = type;
  header.ch_size = stated_size;
  header.ch_addralign = 1;
  std::string out(reinterpret_cast<const char*>(&header), sizeof header);
  uLongf size = compressBound(data.size());
  std::string deflated(size, '\0');
  EXPECT_EQ(compress2(reinterpret_cast<Bytef*>(deflated.data()), &size,
                      reinterpret_cast<const Bytef*>(data.data()), data.size(), 9),
            Z_OK);
  deflated.resize(size);
  return out + deflated;
}

struct Built {
  Result<std::unique_ptr<InlineIndex>> index;
  std::vector<std::string> problems;
  double seconds = 0;
};

Built build_image(const std::string& image)
{
  Built built{fail(error("not built")), {}, 0};
  auto reader = ElfReader::open(ElfBytes::memory(image), "hostile");
  EXPECT_TRUE(reader) << reader.error().message;
  if (!reader)
    return built;
  auto started = std::chrono::steady_clock::now();
  built.index = InlineIndex::build(*reader, 0, built.problems);
  built.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_LT(built.seconds, 10.0);
  if (built.index) {
    EXPECT_LE((*built.index)->memory_bytes(), kMaxInlineIndexBytes);
  }
  return built;
}

Built build_dwarf(const std::string& info,
                  std::vector<std::pair<std::string, std::string>> more = {})
{
  testing::SyntheticElf elf;
  elf.sections = {{".debug_info", info}, {".debug_abbrev", abbreviations()}};
  for (auto& section : more)
    elf.sections.push_back(std::move(section));
  return build_image(elf.bytes());
}

bool has_problem(const Built& built, const std::string& part)
{
  for (const auto& problem : built.problems) {
    if (problem.find(part) != std::string::npos)
      return true;
  }
  return false;
}

std::string problems_of(const Built& built)
{
  std::string text;
  for (const auto& problem : built.problems)
    text += "\n  " + problem;
  return text;
}

TEST(DwarfInlinesHostile, HandMadeUnitIsRead)
{
  auto built = build_dwarf(unit_v4(simple_dies()));
  ASSERT_TRUE(built.index) << built.index.error().message;
  EXPECT_TRUE(built.problems.empty()) << problems_of(built);
  EXPECT_EQ(chain_at(**built.index, 0x1018), Chain{"callee"});
  EXPECT_EQ(chain_at(**built.index, 0x1020), Chain{});
  EXPECT_EQ(chain_at(**built.index, 0x100f), Chain{});
}

TEST(DwarfInlinesHostile, Dwarf64UnitIsRead)
{
  // 64-bit DWARF: unit_length escape, 8-byte abbreviation offset; a 23-byte header.
  std::string dies = simple_dies(23);
  std::string unit;
  put(unit, 0xffffffff, 4);
  put(unit, dies.size() + 11, 8);
  put(unit, 4, 2);
  put(unit, 0, 8);
  unit.push_back(8);
  auto built = build_dwarf(unit + dies);
  ASSERT_TRUE(built.index);
  EXPECT_TRUE(built.problems.empty()) << problems_of(built);
  EXPECT_EQ(chain_at(**built.index, 0x1018), Chain{"callee"});
}

TEST(DwarfInlinesHostile, OldZdebugFormIsRead)
{
  std::string info = unit_v4(simple_dies());
  std::string zdebug = "ZLIB";
  for (int shift = 56; shift >= 0; shift -= 8)
    zdebug.push_back(static_cast<char>(info.size() >> shift));
  zdebug += compressed(info, info.size()).substr(sizeof(Elf64_Chdr));
  testing::SyntheticElf elf;
  elf.sections = {{".zdebug_info", zdebug}, {".debug_abbrev", abbreviations()}};
  auto built = build_image(elf.bytes());
  ASSERT_TRUE(built.index) << built.index.error().message;
  EXPECT_TRUE(built.problems.empty()) << problems_of(built);
  EXPECT_EQ(chain_at(**built.index, 0x1018), Chain{"callee"});
}

TEST(DwarfInlinesHostile, TruncatedUnit)
{
  std::string unit = unit_v4(simple_dies());
  auto built = build_dwarf(unit.substr(0, unit.size() / 2));
  ASSERT_TRUE(built.index);
  EXPECT_TRUE(has_problem(built, "ends inside a unit")) << problems_of(built);
  EXPECT_EQ((*built.index)->ranges(), 0u);
}

TEST(DwarfInlinesHostile, HugeUnitLengthIsSkipped)
{
  std::string info;
  put(info, 0xffffffff, 4);
  put(info, uint64_t{1} << 63, 8);
  put(info, 5, 2);
  info.append(64, '\x01');
  auto built = build_dwarf(info);
  ASSERT_TRUE(built.index);
  EXPECT_TRUE(has_problem(built, "larger than")) << problems_of(built);
}

TEST(DwarfInlinesHostile, DeepNestingIsCut)
{
  // 100,000 nested lexical blocks, then a call inside them all.
  std::string dies = simple_dies();
  dies.resize(dies.size() - 3); // reopen the inlined call's children
  dies.append(100000, static_cast<char>(kBlock));
  dies.push_back(kInlined);
  put(dies, kHeaderBytes + 8, 4);
  put(dies, 0x1014, 8);
  put(dies, 4, 4);
  dies.append(100000 + 4, '\0');
  auto built = build_dwarf(unit_v4(dies));
  ASSERT_TRUE(built.index);
  EXPECT_TRUE(has_problem(built, "nested deeper than")) << problems_of(built);
  EXPECT_EQ(chain_at(**built.index, 0x1018), Chain{"callee"});
}

TEST(DwarfInlinesHostile, DeepInlinedCallsAreCut)
{
  std::string dies = simple_dies();
  dies.resize(dies.size() - 3);
  const int calls = 100000;
  for (int i = 0; i < calls; ++i) {
    dies.push_back(kInlined);
    put(dies, kHeaderBytes + 8, 4);
    put(dies, 0x1010, 8);
    put(dies, 0x10, 4);
  }
  dies.append(calls + 3, '\0');
  auto built = build_dwarf(unit_v4(dies));
  ASSERT_TRUE(built.index);
  // Either cap may act first (nesting of DIEs, depth of calls); both bound the chain.
  EXPECT_TRUE(has_problem(built, "nested deeper than")) << problems_of(built);
  EXPECT_EQ((*built.index)->at(0x1018).size(), kMaxInlineDepth);
}

TEST(DwarfInlinesHostile, OriginCycleEndsUnnamed)
{
  std::string dies;
  dies.push_back(kCompileUnit);
  dies += std::string("unit.c") + '\0';
  uint32_t first = kHeaderBytes + static_cast<uint32_t>(dies.size());
  dies.push_back(kLinked);
  put(dies, first + 5, 4); // the next one
  dies.push_back(kLinked);
  put(dies, first, 4); // back to the first
  append_real_calling(dies, first);
  auto built = build_dwarf(unit_v4(dies));
  ASSERT_TRUE(built.index);
  EXPECT_EQ(chain_at(**built.index, 0x1018), Chain{"??"});
}

TEST(DwarfInlinesHostile, IndirectFormsOneLevelOnly)
{
  std::string dies = simple_dies();
  dies.resize(dies.size() - 3);
  dies.push_back(kIndirect); // nested in the first call, one level of indirection each
  put_uleb(dies, 0x13);
  put(dies, kHeaderBytes + 8, 4);
  put_uleb(dies, 0x01);
  put(dies, 0x1014, 8);
  put_uleb(dies, 0x06);
  put(dies, 4, 4);
  dies.push_back(0);
  auto good = build_dwarf(unit_v4(dies + std::string(3, '\0')));
  ASSERT_TRUE(good.index);
  EXPECT_TRUE(good.problems.empty()) << problems_of(good);
  EXPECT_EQ(chain_at(**good.index, 0x1015), (Chain{"callee", "callee"}));

  dies.push_back(kIndirect); // indirect naming indirect, 1000 times
  for (int i = 0; i < 1000; ++i)
    put_uleb(dies, 0x16);
  dies.append(8, '\0');
  auto chained = build_dwarf(unit_v4(dies + std::string(3, '\0')));
  ASSERT_TRUE(chained.index);
  EXPECT_TRUE(has_problem(chained, "malformed DWARF units")) << problems_of(chained);
}

// A unit with one call whose DW_AT_ranges is at offset 0 of .debug_ranges.
std::string ranged_unit()
{
  std::string dies;
  dies.push_back(kCompileUnit);
  dies += std::string("unit.c") + '\0';
  dies.push_back(kAbstract);
  dies += std::string("callee") + '\0';
  dies.push_back(kFunction);
  dies += std::string("real") + '\0';
  put(dies, 0x1000, 8);
  put(dies, 0x100, 4);
  dies.push_back(kRanged);
  put(dies, kHeaderBytes + 8, 4);
  put(dies, 0, 4);
  dies.append(2, '\0');
  return unit_v4(dies);
}

TEST(DwarfInlinesHostile, MillionEntryRangeListIsCut)
{
  std::string ranges;
  ranges.reserve(16 << 20);
  for (int i = 0; i < 1000000; ++i) {
    put(ranges, 0x1010 + (i % 16), 8);
    put(ranges, 0x1011 + (i % 16), 8);
  }
  put(ranges, 0, 16);
  auto built = build_dwarf(ranged_unit(), {{".debug_ranges", ranges}});
  ASSERT_TRUE(built.index);
  EXPECT_TRUE(has_problem(built, "range lists longer than")) << problems_of(built);
  EXPECT_EQ(chain_at(**built.index, 0x1010), Chain{"callee"});
}

TEST(DwarfInlinesHostile, RangeListOfBaseSelectionsOnlyIsCut)
{
  // Base-address selections over and over, never ending the list: it runs off the section.
  std::string ranges;
  for (int i = 0; i < 100000; ++i) {
    put(ranges, ~uint64_t{0}, 8);
    put(ranges, 0x1000, 8);
  }
  auto built = build_dwarf(ranged_unit(), {{".debug_ranges", ranges}});
  ASSERT_TRUE(built.index);
  EXPECT_TRUE(has_problem(built, "range lists")) << problems_of(built);
}

TEST(DwarfInlinesHostile, ZlibBombStopsAtTheStatedSize)
{
  // 64 MiB of a repeated unit, stated as 4 KiB: no more than 4 KiB is ever inflated.
  std::string unit = unit_v4(simple_dies());
  std::string many;
  while (many.size() < (64u << 20))
    many += unit;
  testing::SyntheticElf elf;
  elf.sections = {{".debug_info", compressed(many, 4096)}, {".debug_abbrev", abbreviations()}};
  elf.section_flags = {{".debug_info", SHF_COMPRESSED}};
  auto built = build_image(elf.bytes());
  ASSERT_TRUE(built.index) << built.index.error().message;
  EXPECT_EQ(chain_at(**built.index, 0x1018), Chain{"callee"});
  EXPECT_LE((*built.index)->ranges(), 4096 / unit.size() + 1);
}

TEST(DwarfInlinesHostile, StatedSizeOfFourGibibytes)
{
  std::string zeros(1 << 20, '\0');
  testing::SyntheticElf elf;
  elf.sections = {{".debug_info", compressed(zeros, uint64_t{4} << 30)},
                  {".debug_abbrev", compressed(abbreviations(), uint64_t{4} << 30)}};
  elf.section_flags = {{".debug_info", SHF_COMPRESSED}, {".debug_abbrev", SHF_COMPRESSED}};
  auto built = build_image(elf.bytes());
  ASSERT_FALSE(built.index);
  EXPECT_TRUE(has_problem(built, "larger than")) << problems_of(built);

  // The same .debug_info with a usable .debug_abbrev: read up to its budget, which zeros end.
  elf.sections[1].second = abbreviations();
  elf.section_flags.erase(".debug_abbrev");
  built = build_image(elf.bytes());
  ASSERT_TRUE(built.index);
  EXPECT_TRUE(has_problem(built, "read only to")) << problems_of(built);
}

TEST(DwarfInlinesHostile, ZstdIsRefused)
{
  testing::SyntheticElf elf;
  elf.sections = {{".debug_info", compressed(unit_v4(simple_dies()), 100, 2)},
                  {".debug_abbrev", abbreviations()}};
  elf.section_flags = {{".debug_info", SHF_COMPRESSED}};
  auto built = build_image(elf.bytes());
  ASSERT_FALSE(built.index);
  EXPECT_NE(built.index.error().message.find("zstd"), std::string::npos);
  EXPECT_NE(built.index.error().message.find("hostile"), std::string::npos);
}

TEST(DwarfInlinesHostile, StringWithoutNul)
{
  std::string dies;
  dies.push_back(kCompileUnit);
  dies += std::string("unit.c") + '\0';
  uint32_t abstract = kHeaderBytes + static_cast<uint32_t>(dies.size());
  dies.push_back(kStrpNamed);
  put(dies, 2, 4);
  append_real_calling(dies, abstract);
  auto built = build_dwarf(unit_v4(dies), {{".debug_str", "callee without an end"}});
  ASSERT_TRUE(built.index);
  EXPECT_TRUE(has_problem(built, "unterminated")) << problems_of(built);
  EXPECT_EQ(chain_at(**built.index, 0x1018), Chain{"??"});
}

TEST(DwarfInlinesHostile, SkeletonUnitIsSkipped)
{
  std::string info;
  put(info, 2 + 1 + 1 + 4 + 8 + 1, 4);
  put(info, 5, 2);
  info.push_back(4); // DW_UT_skeleton
  info.push_back(8);
  put(info, 0, 4);
  put(info, 0x1234, 8); // dwo_id
  info.push_back(0);
  auto built = build_dwarf(info + unit_v4(simple_dies()));
  ASSERT_TRUE(built.index);
  EXPECT_TRUE(has_problem(built, "split-DWARF")) << problems_of(built);
  EXPECT_EQ(chain_at(**built.index, 0x1018), Chain{"callee"});
}

TEST(DwarfInlinesHostile, OverlapsAreCountedNotReported)
{
  // The same inline function described by two units (as COMDAT copies are): one range is kept,
  // the other counted, and neither is a problem.
  auto built = build_dwarf(unit_v4(simple_dies()) + unit_v4(simple_dies()));
  ASSERT_TRUE(built.index);
  EXPECT_TRUE(built.problems.empty()) << problems_of(built);
  EXPECT_EQ((*built.index)->overlaps_dropped(), 1u);
  EXPECT_EQ(chain_at(**built.index, 0x1018), Chain{"callee"});
}

TEST(DwarfInlinesHostile, SmallBudgetKeepsWholeUnitsRead)
{
  // Units each inlining a callee of its own long name (what the budget is mostly spent on), unit i
  // at 0x10 * i into the synthetic file's code (0x1000 bytes at 0x1000).
  constexpr uint32_t kUnits = 256;
  auto callee = [](uint32_t i) { return "callee" + std::to_string(i) + std::string(2000, 'x'); };
  std::string info;
  for (uint32_t i = 0; i < kUnits; ++i) {
    std::string dies;
    dies.push_back(kCompileUnit);
    dies += std::string("unit.c") + '\0';
    uint32_t abstract = kHeaderBytes + static_cast<uint32_t>(dies.size());
    dies.push_back(kAbstract);
    dies += callee(i) + '\0';
    dies.push_back(kFunction);
    dies += std::string("real") + '\0';
    put(dies, 0x1000 + 0x10 * i, 8);
    put(dies, 0x10, 4);
    dies.push_back(kInlined);
    put(dies, abstract, 4);
    put(dies, 0x1004 + 0x10 * i, 8);
    put(dies, 0x8, 4);
    dies.append(3, '\0');
    info += unit_v4(dies);
  }
  auto whole = build_dwarf(info);
  ASSERT_TRUE(whole.index);
  EXPECT_TRUE(whole.problems.empty()) << problems_of(whole);
  EXPECT_EQ((*whole.index)->ranges(), kUnits);
  EXPECT_EQ((*whole.index)->info_fraction_read(), 1.0);

  testing::SyntheticElf elf;
  elf.sections = {{".debug_info", info}, {".debug_abbrev", abbreviations()}};
  std::string image = elf.bytes();
  auto reader = ElfReader::open(ElfBytes::memory(image), "hostile");
  ASSERT_TRUE(reader);
  std::vector<std::string> problems;
  auto part = InlineIndex::build(*reader, 0, problems, 1 << 20);
  ASSERT_TRUE(part) << part.error().message;
  const InlineIndex& index = **part;
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("reached its memory budget"), std::string::npos) << problems[0];
  EXPECT_GT(index.ranges(), 0u);
  EXPECT_LT(index.ranges(), kUnits);
  EXPECT_EQ(index.units_read(), index.ranges());
  EXPECT_LT(index.info_fraction_read(), 1.0);
  // The units read are there whole, the rest not at all: nothing wrong, only less.
  for (uint32_t i = 0; i < kUnits; ++i) {
    Chain expected = i < index.units_read() ? Chain{callee(i)} : Chain{};
    ASSERT_EQ(chain_at(index, 0x1006 + 0x10 * i), expected) << "unit " << i;
    ASSERT_EQ(chain_at(index, 0x1002 + 0x10 * i), Chain{}) << "unit " << i;
  }
}

TEST(DwarfInlinesHostile, GarbageNeverCrashes)
{
  // Every single-byte change of a good unit: whatever it reads, the build ends well.
  std::string unit = unit_v4(simple_dies());
  for (size_t at = 0; at < unit.size(); ++at) {
    for (int value : {0x00, 0x16, 0x7f, 0x80, 0xff}) {
      std::string changed = unit;
      changed[at] = static_cast<char>(value);
      auto built = build_dwarf(changed);
      EXPECT_TRUE(built.index);
    }
  }
}

} // namespace
} // namespace flamebpf::symbolize
