#include "runtimes/go/pclntab.h"

#include <algorithm>
#include <elf.h>

#include "common/byte_cursor.h"

namespace flamebpf::go {
namespace {

constexpr uint32_t kMagicGo12 = 0xfffffffb;
constexpr uint32_t kMagicGo116 = 0xfffffffa;
constexpr uint32_t kMagicGo118 = 0xfffffff0;
constexpr uint32_t kMagicGo120 = 0xfffffff1;
// runtime/symtab.go: the pcdata table of the inline tree's index, and the funcdata of the tree.
constexpr uint32_t kPcdataInlineIndex = 2;
constexpr uint32_t kFuncdataInlineTree = 3;
constexpr uint32_t kNoFuncdata = 0xffffffff;
// runtime/symtab.go's funcFlag.
constexpr uint8_t kFlagTopFrame = 1;
constexpr uint8_t kFlagSpWrite = 2;
// The roots of stacks, by name, for binaries whose records have no flags.
constexpr std::string_view kTopFrames[] = {"runtime.goexit", "runtime.mstart", "runtime.rt0_go"};
// Entries of one inline tree read at most.
constexpr int32_t kMaxInlineTreeEntries = 1 << 16;
// A record's pcdata and funcdata counts: Go has a handful of each.
constexpr uint32_t kMaxTableCount = 256;
// What one read of the file takes at least, so that consecutive records and tables share it.
constexpr size_t kWindowBytes = 64 << 10;
// A pc-value table read at most: kMaxPcValueSteps steps of a few bytes each.
constexpr size_t kMaxPcValueTableBytes = 1 << 20;
// Read-only bytes searched for a table whose section headers are gone (the largest Go programs'
// read-only data is a few tens of MB), and the data searched for the module data (Go 1.18+) that
// locates the inline trees.
constexpr uint64_t kMaxSearchBytes = 128ull << 20;
constexpr uint64_t kMaxModuleSearchBytes = 64ull << 20;
constexpr size_t kSearchStep = 1 << 20;
// A position-independent binary's dynamic relocations read at most (a large Go program has a few
// hundred thousand, 24 bytes each), and the words found pointing at the table's header that are
// taken for its module data.
constexpr uint64_t kMaxRelocationBytes = 64ull << 20;
constexpr size_t kMaxModuleCandidates = 8;
// runtime.moduledata: the words before gofunc (pcHeader, six slices, findfunctab, minpc, maxpc,
// text, etext, eight data bounds, [Go 1.20+: covctrs, ecovctrs], end, gcdata, gcbss, types, etypes,
// rodata); funcnametab's data is word 1, text word 22.
constexpr size_t kModuleGofuncWordGo118 = 38;
constexpr size_t kModuleGofuncWordGo120 = 40;
constexpr size_t kModuleTextWord = 22;

std::optional<PclntabLayout> layout_of(uint32_t magic)
{
  switch (magic) {
  case kMagicGo12:
    return PclntabLayout::kGo12;
  case kMagicGo116:
    return PclntabLayout::kGo116;
  case kMagicGo118:
    return PclntabLayout::kGo118;
  case kMagicGo120:
    return PclntabLayout::kGo120;
  default:
    return std::nullopt;
  }
}

// Whether bytes start with a pclntab header: a known magic, two zero pads, a pc quantum of 1, 2
// or 4 and a pointer size of 4 or 8.
bool looks_like_header(std::string_view bytes)
{
  if (bytes.size() < 8)
    return false;
  ByteCursor cursor(bytes);
  uint32_t magic = cursor.fixed<uint32_t>();
  uint8_t pad1 = cursor.byte(), pad2 = cursor.byte(), quantum = cursor.byte(),
          pointer = cursor.byte();
  return layout_of(magic) && pad1 == 0 && pad2 == 0 &&
         (quantum == 1 || quantum == 2 || quantum == 4) && (pointer == 4 || pointer == 8);
}

} // namespace

std::string_view Pclntab::layout_name() const
{
  switch (layout_) {
  case PclntabLayout::kGo12:
    return "Go 1.2-1.15";
  case PclntabLayout::kGo116:
    return "Go 1.16-1.17";
  case PclntabLayout::kGo118:
    return "Go 1.18-1.19";
  case PclntabLayout::kGo120:
    return "Go 1.20+";
  }
  return "Go";
}

std::optional<Pclntab>
Pclntab::search(const ElfReader& elf, uint64_t offset, uint64_t vaddr, uint64_t size)
{
  uint64_t searched = std::min(size, kMaxSearchBytes);
  std::string chunk;
  for (uint64_t at = 0; at < searched; at += kSearchStep) {
    size_t length = static_cast<size_t>(std::min<uint64_t>(kSearchStep + 8, searched - at));
    if (!elf.bytes().read(offset + at, length, chunk))
      break;
    for (size_t i = 0; i + 8 <= chunk.size(); i += 8) {
      if (!looks_like_header(std::string_view(chunk).substr(i, 8)))
        continue;
      Pclntab candidate(elf);
      candidate.vaddr_ = vaddr + at + i;
      if (candidate.read_header(offset + at + i, size - at - i))
        return candidate;
    }
  }
  return std::nullopt;
}

Result<std::optional<Pclntab>> Pclntab::open(const ElfReader& elf)
{
  // Go's linker names the table's section .gopclntab, or .data.rel.ro.gopclntab in a
  // position-independent binary, whose relocations write into it.
  for (std::string_view name : {".gopclntab", ".data.rel.ro.gopclntab"}) {
    const ElfSection* section = elf.section_named(name);
    if (!section)
      continue;
    if (section->type == SHT_NOBITS || section->size < 16)
      return fail(error(std::string(name) + " of " + elf.shown() + " is empty"));
    Pclntab table(elf);
    table.vaddr_ = section->address;
    if (auto read = table.read_header(section->offset, section->size); !read)
      return fail(error(std::string(name) + " of " + elf.shown() + ": " + read.error().message));
    return std::optional<Pclntab>(std::move(table));
  }
  if (elf.sections().size() > 1) {
    // A position-independent Go binary linked by the system's linker: that linker merged Go's
    // section into .data.rel.ro, where the table's header is searched for. Other files with
    // section headers would have named their table.
    const ElfSection* relro = elf.section_named(".data.rel.ro");
    bool go_binary = elf.section_named(".go.buildinfo") || elf.section_named(".note.go.buildid");
    if (!go_binary || !relro || relro->type == SHT_NOBITS || relro->size < 16)
      return std::optional<Pclntab>();
    if (auto found = search(elf, relro->offset, relro->address, relro->size))
      return std::optional<Pclntab>(std::move(*found));
    return fail(error("no pclntab found in the .data.rel.ro of Go binary " + elf.shown()));
  }
  // One without (stripped of them, as sstrip and some packers do) is searched: the table starts
  // a read-only segment's piece, aligned as the linker aligns it.
  for (const auto& segment : elf.segments()) {
    if (segment.type != PT_LOAD || (segment.flags & (PF_W | PF_X)) || segment.file_size < 16)
      continue;
    if (auto found = search(elf, segment.offset, segment.vaddr, segment.file_size))
      return std::optional<Pclntab>(std::move(*found));
  }
  return std::optional<Pclntab>();
}

uint64_t Pclntab::word(std::string_view bytes, size_t at) const
{
  ByteCursor cursor(bytes, at);
  return cursor.fixed(pointer_size_);
}

Result<> Pclntab::read_header(uint64_t start, uint64_t size)
{
  start_ = start;
  end_ = start + size;
  auto head = read(start, 8 + 8 * 8);
  if (!head || !looks_like_header(*head))
    return fail(error("no pclntab header"));
  ByteCursor cursor(*head);
  layout_ = *layout_of(cursor.fixed<uint32_t>());
  cursor.fixed<uint16_t>();
  pc_quantum_ = cursor.byte();
  pointer_size_ = cursor.byte();
  std::string header(*head);
  auto at = [&](size_t index) { return word(header, 8 + index * pointer_size_); };
  auto inside = [&](uint64_t offset) { return offset < size; };
  uint64_t functions = at(0);
  uint64_t function_table = 0;
  switch (layout_) {
  case PclntabLayout::kGo12:
    names_ = start;
    pc_tables_ = start;
    records_ = start;
    function_table = 8 + pointer_size_;
    break;
  case PclntabLayout::kGo116:
    if (!inside(at(2)) || !inside(at(5)) || !inside(at(6)))
      return fail(error("its offsets lie outside it"));
    names_ = start + at(2);
    pc_tables_ = start + at(5);
    records_ = start + at(6);
    function_table = at(6);
    break;
  case PclntabLayout::kGo118:
  case PclntabLayout::kGo120:
    if (!inside(at(3)) || !inside(at(6)) || !inside(at(7)))
      return fail(error("its offsets lie outside it"));
    text_start_ = at(2);
    names_ = start + at(3);
    pc_tables_ = start + at(6);
    records_ = start + at(7);
    function_table = at(7);
    break;
  }
  if (functions == 0 || functions > kMaxGoFunctions)
    return fail(error(std::to_string(functions) + " functions"));
  if ((layout_ == PclntabLayout::kGo118 || layout_ == PclntabLayout::kGo120) && text_start_ == 0) {
    // A position-independent binary's header is written at load time, as its relocations say
    // (linkers that also write the value into the file, Go's and GNU ld, spare the search). The
    // section is a last resort: an external linker puts C code at its start.
    std::vector<uint64_t> at_words = {vaddr_ + 8 + 2 * pointer_size_};
    std::vector<std::optional<uint64_t>> found(1);
    relocated_words(at_words, found);
    if (found[0]) {
      text_start_ = *found[0];
    } else if (const ElfSection* text = elf_->section_named(".text")) {
      text_start_ = text->address;
    } else {
      return fail(error("its text start is relocated and the binary has no .text section"));
    }
  }
  size_t entry_bytes =
      layout_ == PclntabLayout::kGo118 || layout_ == PclntabLayout::kGo120 ? 8 : 2 * pointer_size_;
  size_t end_bytes = entry_bytes / 2;
  uint64_t table_bytes = functions * entry_bytes + end_bytes;
  if (function_table > size || table_bytes > size - function_table)
    return fail(error("its function table runs past its end"));
  auto bytes = elf_->bytes().read(start + function_table, static_cast<size_t>(table_bytes));
  if (!bytes)
    return fail(error("cannot read its function table: " + bytes.error().message));
  ByteCursor entries(*bytes);
  std::vector<std::pair<uint64_t, uint64_t>> read_entries;
  read_entries.reserve(static_cast<size_t>(functions) + 1);
  for (uint64_t i = 0; i <= functions; ++i) {
    uint64_t entry = entries.fixed(end_bytes);
    uint64_t record = i < functions ? entries.fixed(end_bytes) : 0;
    if (layout_ == PclntabLayout::kGo118 || layout_ == PclntabLayout::kGo120)
      entry += text_start_;
    read_entries.emplace_back(entry, record);
  }
  if (layout_ == PclntabLayout::kGo12 || layout_ == PclntabLayout::kGo116)
    text_start_ = read_entries.front().first;
  text_end_ = read_entries.back().first;
  functions_.reserve(static_cast<size_t>(functions));
  for (uint64_t i = 0; i < functions; ++i) {
    auto [entry, record] = read_entries[i];
    uint64_t next = read_entries[i + 1].first;
    if (entry < text_start_ || next < entry || next - text_start_ > UINT32_MAX ||
        record > UINT32_MAX || record >= end_ - records_)
      return fail(error("its function table is not sorted or points outside it"));
    functions_.push_back(
        {static_cast<uint32_t>(entry - text_start_), static_cast<uint32_t>(record)});
  }
  return {};
}

GoFunction Pclntab::function(size_t index) const
{
  uint64_t entry = text_start_ + functions_[index].entry_offset;
  uint64_t end =
      index + 1 < functions_.size() ? text_start_ + functions_[index + 1].entry_offset : text_end_;
  return {entry, end};
}

std::optional<size_t> Pclntab::find(uint64_t address) const
{
  if (address < text_start_ || address >= text_end_ || functions_.empty())
    return std::nullopt;
  auto offset = static_cast<uint32_t>(address - text_start_);
  auto it = std::upper_bound(functions_.begin(), functions_.end(), offset,
                             [](uint32_t value, const Entry& e) { return value < e.entry_offset; });
  if (it == functions_.begin())
    return std::nullopt;
  return static_cast<size_t>(std::prev(it) - functions_.begin());
}

std::optional<std::string_view> Pclntab::read_anywhere(uint64_t offset, size_t length)
{
  ++uses_;
  Window* oldest = &windows_[0];
  for (Window& window : windows_) {
    if (offset >= window.at && offset - window.at <= window.bytes.size() &&
        length <= window.bytes.size() - (offset - window.at)) {
      window.last_use = uses_;
      return std::string_view(window.bytes).substr(offset - window.at, length);
    }
    if (window.last_use < oldest->last_use)
      oldest = &window;
  }
  uint64_t available = elf_->bytes().size() > offset ? elf_->bytes().size() - offset : 0;
  size_t wanted =
      static_cast<size_t>(std::min<uint64_t>(std::max(length, kWindowBytes), available));
  if (wanted < length || !elf_->bytes().read(offset, wanted, oldest->bytes)) {
    oldest->bytes.clear();
    oldest->last_use = 0;
    return std::nullopt;
  }
  oldest->at = offset;
  oldest->last_use = uses_;
  return std::string_view(oldest->bytes).substr(0, length);
}

void Pclntab::release_windows()
{
  for (Window& window : windows_) {
    window.bytes.clear();
    window.bytes.shrink_to_fit();
    window.last_use = 0;
  }
}

std::optional<std::string_view> Pclntab::read(uint64_t offset, size_t length)
{
  if (offset < start_ || offset > end_ || length > end_ - offset)
    return std::nullopt;
  return read_anywhere(offset, length);
}

std::optional<Pclntab::Record> Pclntab::record(size_t index)
{
  uint64_t at = records_ + functions_[index].record_offset;
  size_t p = pointer_size_;
  // Where each field is in the layout's record (after the entry, which is a pointer before 1.18).
  size_t name = 0, pcsp = 0, pcdata_count = 0, funcdata_count = 0, flag = 0, fixed = 0;
  switch (layout_) {
  case PclntabLayout::kGo12:
    name = p, pcsp = p + 12, pcdata_count = p + 24, fixed = p + 32;
    break;
  case PclntabLayout::kGo116:
    name = p, pcsp = p + 12, pcdata_count = p + 24, funcdata_count = p + 35, fixed = p + 36;
    break;
  case PclntabLayout::kGo118:
    name = 4, pcsp = 16, pcdata_count = 28, flag = 37, funcdata_count = 39, fixed = 40;
    break;
  case PclntabLayout::kGo120:
    name = 4, pcsp = 16, pcdata_count = 28, flag = 41, funcdata_count = 43, fixed = 44;
    break;
  }
  auto bytes = read(at, fixed);
  if (!bytes)
    return std::nullopt;
  ByteCursor cursor(*bytes);
  uint64_t entry = layout_ == PclntabLayout::kGo12 || layout_ == PclntabLayout::kGo116
                       ? cursor.fixed(p)
                       : text_start_ + cursor.fixed<uint32_t>();
  Record record;
  record.name_offset = ByteCursor(*bytes, name).fixed<uint32_t>();
  record.pcsp = ByteCursor(*bytes, pcsp).fixed<uint32_t>();
  record.pcdata_count = ByteCursor(*bytes, pcdata_count).fixed<uint32_t>();
  record.funcdata_count = funcdata_count ? ByteCursor(*bytes, funcdata_count).byte() : 0;
  if (flag)
    record.flag = ByteCursor(*bytes, flag).byte();
  record.pcdata_at = at + fixed;
  record.funcdata_at = record.pcdata_at + 4ull * record.pcdata_count;
  if (layout_ == PclntabLayout::kGo116)
    record.funcdata_at = (record.funcdata_at + p - 1) / p * p;
  // The record must be the function's own: a table pointing elsewhere is malformed.
  if (entry != function(index).entry || record.pcdata_count > kMaxTableCount)
    return std::nullopt;
  return record;
}

std::string Pclntab::string_at(uint64_t offset)
{
  uint64_t at = names_ + offset;
  if (at < names_ || at >= end_)
    return {};
  size_t length = static_cast<size_t>(std::min<uint64_t>(kMaxGoNameBytes + 1, end_ - at));
  auto bytes = read(at, length);
  if (!bytes)
    return {};
  size_t nul = bytes->find('\0');
  return std::string(bytes->substr(0, std::min(nul, kMaxGoNameBytes)));
}

std::string Pclntab::name(size_t index)
{
  auto found = record(index);
  if (!found) {
    ++malformed_;
    return {};
  }
  return string_at(found->name_offset);
}

std::optional<Pclntab::FunctionName> Pclntab::function_name(size_t index)
{
  auto found = record(index);
  if (!found) {
    ++malformed_;
    return std::nullopt;
  }
  return FunctionName{found->name_offset, string_at(found->name_offset)};
}

bool Pclntab::decode(size_t index,
                     uint64_t table,
                     std::vector<PcValueRun>& runs,
                     uint64_t stop_after)
{
  GoFunction function = this->function(index);
  uint64_t at = pc_tables_ + table;
  if (at < pc_tables_ || at >= end_)
    return false;
  // Most tables are a few bytes: the window holds them; a longer one is read whole.
  size_t length = static_cast<size_t>(std::min<uint64_t>(kMaxPcValueTableBytes, end_ - at));
  auto bytes = read(at, std::min(length, kWindowBytes));
  uint64_t pc = function.entry;
  int32_t value = -1;
  for (int pass = 0; pass < 2 && bytes; ++pass) {
    ByteCursor cursor(*bytes);
    pc = function.entry;
    value = -1;
    size_t first_run = runs.size();
    bool ran_out = false;
    for (size_t step = 0; step < kMaxPcValueSteps; ++step) {
      uint64_t value_delta = cursor.uleb();
      if (!cursor.ok()) {
        ran_out = true;
        break;
      }
      if (value_delta == 0 && step > 0)
        return true;
      // Zigzag: the low bit is the sign.
      auto delta = static_cast<int32_t>(static_cast<uint32_t>(value_delta >> 1) ^
                                        (0u - static_cast<uint32_t>(value_delta & 1)));
      value = static_cast<int32_t>(static_cast<uint32_t>(value) + static_cast<uint32_t>(delta));
      uint64_t pc_delta = cursor.uleb();
      if (!cursor.ok()) {
        ran_out = true;
        break;
      }
      if (pc_delta > (function.end - pc) / pc_quantum_)
        pc_delta = (function.end - pc) / pc_quantum_; // past the function: cut at its end
      uint64_t next = pc + pc_delta * pc_quantum_;
      if (next > pc)
        runs.push_back({pc, next, value});
      pc = next;
      if (pc >= function.end || pc > stop_after)
        return true;
    }
    if (!ran_out)
      return false; // too many steps
    // The table runs past the window: once more with the whole of it.
    runs.resize(first_run);
    if (bytes->size() >= length)
      return false;
    bytes = read(at, length);
  }
  return false;
}

bool Pclntab::stack_deltas(size_t index, std::vector<PcValueRun>& runs)
{
  auto found = record(index);
  if (!found) {
    ++malformed_;
    return false;
  }
  return decode(index, found->pcsp, runs, UINT64_MAX);
}

Pclntab::Flags Pclntab::flags_of(const Record& record)
{
  Flags flags;
  if (record.flag) {
    flags.top_frame = *record.flag & kFlagTopFrame;
    flags.sp_write = *record.flag & kFlagSpWrite;
  } else {
    std::string name = string_at(record.name_offset);
    flags.top_frame =
        std::find(std::begin(kTopFrames), std::end(kTopFrames), name) != std::end(kTopFrames);
  }
  return flags;
}

std::optional<Pclntab::Flags> Pclntab::flags(size_t index)
{
  auto found = record(index);
  if (!found)
    return std::nullopt;
  return flags_of(*found);
}

std::optional<Pclntab::Flags> Pclntab::frame(size_t index, std::vector<PcValueRun>& runs)
{
  auto found = record(index);
  if (!found) {
    ++malformed_;
    return std::nullopt;
  }
  Flags flags = flags_of(*found);
  if (!decode(index, found->pcsp, runs, UINT64_MAX))
    return std::nullopt;
  return flags;
}

std::optional<uint64_t> Pclntab::funcdata_base()
{
  if (funcdata_base_tried_)
    return funcdata_base_;
  funcdata_base_tried_ = true;
  size_t gofunc_word =
      layout_ == PclntabLayout::kGo120 ? kModuleGofuncWordGo120 : kModuleGofuncWordGo118;
  size_t p = pointer_size_;
  // The module data is the first writable datum that points at this table, then at its names.
  for (const auto& segment : elf_->segments()) {
    if (segment.type != PT_LOAD || !(segment.flags & PF_W))
      continue;
    uint64_t searched = std::min(segment.file_size, kMaxModuleSearchBytes);
    std::string chunk;
    size_t module_bytes = (gofunc_word + 1) * p;
    for (uint64_t at = 0; at < searched; at += kSearchStep) {
      size_t length =
          static_cast<size_t>(std::min<uint64_t>(kSearchStep + module_bytes, searched - at));
      if (!elf_->bytes().read(segment.offset + at, length, chunk))
        break;
      for (size_t i = 0; i + module_bytes <= chunk.size(); i += p) {
        if (word(chunk, i) != vaddr_ || word(chunk, i + p) != vaddr_ + (names_ - start_) ||
            word(chunk, i + kModuleTextWord * p) != text_start_)
          continue;
        funcdata_base_ = word(chunk, i + gofunc_word * p);
        return funcdata_base_;
      }
    }
  }
  // A position-independent binary's module data holds zeros in the file: its pointers are
  // written at load time, as its relocations say.
  funcdata_base_ = relocated_funcdata_base(gofunc_word);
  return funcdata_base_;
}

template <class Visit> void Pclntab::each_relative_relocation(Visit&& visit) const
{
  const ElfSection* relocations = elf_->section_named(".rela.dyn");
  if (!relocations)
    relocations = elf_->section_named(".rela"); // Go's own linker's name
  if (!relocations || relocations->type != SHT_RELA || !elf_->is_64() ||
      elf_->machine() != EM_X86_64 || pointer_size_ != 8)
    return;
  constexpr size_t kEntry = sizeof(Elf64_Rela);
  constexpr size_t kChunk = kSearchStep / kEntry * kEntry;
  uint64_t size = std::min(relocations->size, kMaxRelocationBytes) / kEntry * kEntry;
  std::string chunk;
  for (uint64_t at = 0; at < size; at += kChunk) {
    size_t length = static_cast<size_t>(std::min<uint64_t>(kChunk, size - at));
    if (!elf_->bytes().read(relocations->offset + at, length, chunk))
      return;
    for (size_t i = 0; i + kEntry <= chunk.size(); i += kEntry) {
      ByteCursor entry(chunk, i);
      uint64_t offset = entry.fixed<uint64_t>();
      uint64_t info = entry.fixed<uint64_t>();
      uint64_t addend = entry.fixed<uint64_t>();
      if (ELF64_R_TYPE(info) == R_X86_64_RELATIVE)
        visit(offset, addend);
    }
  }
}

void Pclntab::relocated_words(const std::vector<uint64_t>& at,
                              std::vector<std::optional<uint64_t>>& found) const
{
  each_relative_relocation([&](uint64_t offset, uint64_t addend) {
    for (size_t i = 0; i < at.size(); ++i)
      if (offset == at[i])
        found[i] = addend;
  });
}

std::optional<uint64_t> Pclntab::relocated_funcdata_base(size_t gofunc_word)
{
  // The module data's first word points at the table's header, its second at the names.
  std::vector<uint64_t> modules;
  each_relative_relocation([&](uint64_t offset, uint64_t addend) {
    if (addend == vaddr_ && modules.size() < kMaxModuleCandidates)
      modules.push_back(offset);
  });
  std::vector<uint64_t> words;
  for (uint64_t module : modules) {
    words.push_back(module + pointer_size_);
    words.push_back(module + gofunc_word * pointer_size_);
  }
  std::vector<std::optional<uint64_t>> found(words.size());
  relocated_words(words, found);
  for (size_t i = 0; i < modules.size(); ++i)
    if (found[2 * i] == vaddr_ + (names_ - start_) && found[2 * i + 1])
      return found[2 * i + 1];
  return std::nullopt;
}

bool Pclntab::inline_tree(size_t index,
                          std::vector<PcValueRun>& runs,
                          std::vector<InlinedCall>& calls)
{
  runs.clear();
  calls.clear();
  if (layout_ == PclntabLayout::kGo12)
    return false; // its records do not say where their funcdata begin
  auto found = record(index);
  if (!found || found->pcdata_count <= kPcdataInlineIndex ||
      found->funcdata_count <= kFuncdataInlineTree)
    return false;
  auto index_table = read(found->pcdata_at + 4 * kPcdataInlineIndex, 4);
  if (!index_table)
    return false;
  uint32_t index_runs = ByteCursor(*index_table).fixed<uint32_t>();
  uint64_t tree = 0;
  if (layout_ == PclntabLayout::kGo116) {
    auto slot =
        read_anywhere(found->funcdata_at + pointer_size_ * kFuncdataInlineTree, pointer_size_);
    if (!slot)
      return false;
    tree = word(*slot, 0);
  } else {
    auto slot = read_anywhere(found->funcdata_at + 4 * kFuncdataInlineTree, 4);
    if (!slot)
      return false;
    uint32_t offset = ByteCursor(*slot).fixed<uint32_t>();
    auto base = funcdata_base();
    if (offset == kNoFuncdata || !base)
      return false;
    tree = *base + offset;
  }
  auto tree_at = elf_->file_offset_of(tree);
  if (tree == 0 || !tree_at || index_runs == 0 || !decode(index, index_runs, runs, UINT64_MAX))
    return false;
  GoFunction function = this->function(index);
  size_t call_bytes = layout_ == PclntabLayout::kGo120 ? 16 : 20;
  // Go 1.20+ gives each call's parent as a pc of the function, whose own index is the parent.
  auto index_at = [&](uint64_t address) -> int32_t {
    auto run = std::upper_bound(runs.begin(), runs.end(), address,
                                [](uint64_t at, const PcValueRun& r) { return at < r.begin; });
    if (run == runs.begin() || address >= std::prev(run)->end)
      return -1;
    return std::prev(run)->value;
  };
  std::vector<int32_t> pending;
  for (const auto& run : runs)
    if (run.value >= 0)
      pending.push_back(run.value);
  std::vector<bool> read_already;
  while (!pending.empty()) {
    int32_t call = pending.back();
    pending.pop_back();
    if (call < 0 || call >= kMaxInlineTreeEntries)
      return false;
    auto slot = static_cast<size_t>(call);
    if (slot < read_already.size() && read_already[slot])
      continue;
    uint64_t offset = slot * call_bytes;
    if (offset + call_bytes > tree_at->second)
      return false;
    auto bytes = read_anywhere(tree_at->first + offset, call_bytes);
    if (!bytes)
      return false;
    ByteCursor cursor(*bytes);
    InlinedCall inlined;
    if (layout_ == PclntabLayout::kGo120) {
      // funcID, 3 pad bytes, nameOff, parentPc (from the entry), startLine.
      cursor.fixed<uint32_t>();
      inlined.name = string_at(cursor.fixed<uint32_t>());
      inlined.parent = index_at(function.entry + cursor.fixed<uint32_t>());
    } else {
      // parent index, funcID, pad, file, line, name offset, parentPc.
      inlined.parent = static_cast<int16_t>(cursor.fixed<uint16_t>());
      cursor.fixed<uint16_t>();
      cursor.fixed<uint64_t>();
      inlined.name = string_at(cursor.fixed<uint32_t>());
    }
    if (slot >= calls.size()) {
      calls.resize(slot + 1);
      read_already.resize(slot + 1);
    }
    read_already[slot] = true;
    if (inlined.parent >= 0)
      pending.push_back(inlined.parent);
    calls[slot] = std::move(inlined);
  }
  return true;
}

} // namespace flamebpf::go
