#include "unwind/cfi_table.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <elf.h>
#include <limits>
#include <optional>
#include <unordered_map>
#include <vector>

#include "common/byte_cursor.h"
#include "common/hashing.h"
#include "dwarf/cfa_instructions.h"
#include "unwind/arch.h"

// The parser is our own. libdw's dwarf_getcfi_elf needs a libelf Elf*, which flamebpf never builds
// over a target's file (libelf has no byte budget: a 128-byte sparse ELF made it take 2 GB), and
// libunwind's DWARF code unwinds one live context rather than exporting tables.

namespace flamebpf::unwind {
namespace {

using dwarf::kPointerOmit;
using dwarf::read_pointer;

// Distinct CIEs one file may have; real files have a few hundred at most.
constexpr size_t kMaxCies = 1 << 16;

// The rule of one register, as far as the table needs it.
struct RegisterRule {
  enum Kind : uint8_t {
    unset,     // no instruction named the register
    undefined, // DW_CFA_undefined: not recoverable (for the return address: the outermost frame)
    same,      // DW_CFA_same_value
    at_cfa,    // saved at CFA + offset
    other,     // in another register, an expression, a value rule: not for the sampler
  };
  Kind kind = unset;
  int64_t offset = 0;
  bool operator==(const RegisterRule&) const = default;
};

struct CfaRule {
  enum Kind : uint8_t {
    register_offset, // reg + offset
    plt,             // GCC's PLT expression
    expression,      // any other DWARF expression
  };
  Kind kind = register_offset;
  uint64_t reg = arch::kDwarfSp;
  int64_t offset = 0;
};

// The rules the table is made of, at one address.
struct RuleState {
  CfaRule cfa;
  RegisterRule fp;
  RegisterRule ra;
};

struct Cie {
  uint64_t code_alignment = 1;
  int64_t data_alignment = 1;
  uint64_t return_address_register = arch::kDwarfReturnAddress;
  uint8_t pointer_encoding = 0; // of the FDEs' addresses
  uint8_t address_size = 8;
  bool has_augmentation_data = false; // 'z': FDEs carry a length-prefixed augmentation
  bool signal_frame = false;          // 'S'
  RuleState initial;
};

// Where one FDE is and what it covers.
struct FdeSpan {
  uint64_t start = 0;
  uint64_t end = 0;
  uint32_t instructions = 0; // offset of its instructions in the section
  uint32_t instructions_end = 0;
  uint32_t cie = 0; // the offset of its CIE
};

bool fits_s16(int64_t value)
{
  return value >= std::numeric_limits<int16_t>::min() &&
         value <= std::numeric_limits<int16_t>::max();
}

fb_unwind_row frame_pointer_row(uint32_t pc_offset)
{
  return fb_unwind_row{pc_offset, FB_UNWIND_FRAME_POINTER, 0, 0};
}

// The row for state, or nullopt when the sampler cannot follow it (then: the frame pointer).
std::optional<fb_unwind_row> row_for(const RuleState& state, bool signal_frame)
{
  fb_unwind_row row{0, FB_UNWIND_FRAME_POINTER, 0, 0};
  if (signal_frame) {
    row.kind = FB_UNWIND_SIGNAL;
    return row;
  }
  if (state.ra.kind == RegisterRule::undefined) {
    row.kind = FB_UNWIND_STOP;
    return row;
  }
  if (state.cfa.kind == CfaRule::plt) {
    row.kind = FB_UNWIND_PLT;
    return row;
  }
  if (state.cfa.kind != CfaRule::register_offset || !fits_s16(state.cfa.offset))
    return std::nullopt;
  if (state.cfa.reg == arch::kDwarfSp)
    row.kind = FB_UNWIND_CFA_SP;
  else if (state.cfa.reg == arch::kDwarfFp)
    row.kind = FB_UNWIND_CFA_FP;
  else
    return std::nullopt;
  row.cfa_offset = static_cast<int16_t>(state.cfa.offset);
  // The return address is where a call leaves it, whatever the CFI says; any other rule is one the
  // sampler cannot follow.
  if (state.ra.kind == RegisterRule::at_cfa ? state.ra.offset != arch::kReturnAddressAtCfa
                                            : state.ra.kind != RegisterRule::unset)
    return std::nullopt;
  switch (state.fp.kind) {
  case RegisterRule::unset:
  case RegisterRule::same:
  case RegisterRule::undefined:
    break;
  case RegisterRule::at_cfa:
    if (state.fp.offset % arch::kWordBytes != 0 ||
        state.fp.offset / arch::kWordBytes < std::numeric_limits<int8_t>::min() ||
        state.fp.offset / arch::kWordBytes > std::numeric_limits<int8_t>::max() ||
        state.fp.offset == 0)
      return std::nullopt;
    row.fp_offset_words = static_cast<int8_t>(state.fp.offset / arch::kWordBytes);
    break;
  case RegisterRule::other:
    return std::nullopt;
  }
  return row;
}

bool same_rule(const fb_unwind_row& a, const fb_unwind_row& b)
{
  return a.kind == b.kind && a.fp_offset_words == b.fp_offset_words && a.cfa_offset == b.cfa_offset;
}

// Appends row to rows, merged with the last one when they say the same, or replacing it when it
// held for no byte.
void append_row(std::vector<fb_unwind_row>& rows, const fb_unwind_row& row)
{
  if (!rows.empty() && rows.back().pc_offset == row.pc_offset)
    rows.pop_back();
  if (!rows.empty() && same_rule(rows.back(), row))
    return;
  rows.push_back(row);
}

// The length and id fields of the entry at offset: the entry's end, the id's offset and the id,
// and whether the id field is 8 bytes (64-bit DWARF).
struct EntryHeader {
  size_t end = 0;
  size_t id_offset = 0;
  uint64_t id = 0;
  bool wide = false;
  bool terminator = false; // .eh_frame's zero length
  bool id_ok = true;       // the entry is long enough for its id
};

std::optional<EntryHeader> read_entry_header(std::string_view bytes, size_t offset)
{
  ByteCursor cursor(bytes, offset, bytes.size());
  EntryHeader header;
  uint64_t length = cursor.fixed<uint32_t>();
  if (length == 0xffffffff) {
    length = cursor.fixed<uint64_t>();
    header.wide = true;
  }
  if (!cursor.ok())
    return std::nullopt;
  if (length == 0) {
    header.terminator = true;
    header.end = cursor.position();
    return header;
  }
  if (length > cursor.end() - cursor.position())
    return std::nullopt;
  header.end = cursor.position() + length;
  header.id_offset = cursor.position();
  ByteCursor id(bytes, header.id_offset, header.end);
  header.id = header.wide ? id.fixed<uint64_t>() : id.fixed<uint32_t>();
  header.id_ok = id.ok();
  return header;
}

class Builder {
public:
  Builder(const CfiSection& cfi, CfiCounts& counts) : cfi_(cfi), counts_(counts) {}

  Result<UnwindTable> build();

private:
  // Reads the section's entries: CIEs into cies_, FDEs into spans_.
  void read_entries();
  // The CIE at offset, parsed once; null if malformed or over kMaxCies.
  const Cie* cie_at(uint64_t offset);
  std::optional<Cie> parse_cie(uint64_t offset);
  // Where run() puts an FDE's rows: one per advance, merged as the table merges them.
  struct RowSink {
    std::vector<fb_unwind_row>& rows;
    uint64_t base = 0;      // the table's base address
    size_t max_rows = 0;    // more, and run() stops with capped set
    uint64_t fallbacks = 0; // rows whose rule the sampler cannot follow
    bool capped = false;
  };
  // Runs the instructions of [begin, end) from state; with a sink, emits the rows from address
  // start up to limit. False if malformed or capped.
  bool run(size_t begin,
           size_t end,
           const Cie& cie,
           RuleState& state,
           uint64_t start,
           uint64_t limit,
           RowSink* sink);
  // Calls visit(offset, header) for each entry of the section, in order, up to its end, its
  // terminator (.eh_frame) or an entry whose length runs past the end (then returns false).
  template <class Visit> bool walk_entries(Visit visit);
  bool is_cie(const EntryHeader& header) const;

  const CfiSection& cfi_;
  CfiCounts& counts_;
  // The offsets where the section's CIEs start: an FDE may name only these, so that no two CIEs
  // overlap and parsing them all reads each byte at most once.
  std::vector<bool> cie_starts_;
  std::unordered_map<uint64_t, std::optional<Cie>> cies_;
  std::vector<FdeSpan> spans_;
};

std::optional<Cie> Builder::parse_cie(uint64_t offset)
{
  auto header = read_entry_header(cfi_.bytes, offset);
  if (!header || header->terminator || !header->id_ok)
    return std::nullopt;
  uint64_t cie_id = cfi_.eh_frame ? 0 : (header->wide ? ~uint64_t{0} : 0xffffffff);
  if (header->id != cie_id)
    return std::nullopt;
  ByteCursor cursor(cfi_.bytes, header->id_offset + (header->wide ? 8 : 4), header->end);
  Cie cie;
  uint8_t version = cursor.byte();
  if (version != 1 && version != 3 && version != 4)
    return std::nullopt;
  std::string_view augmentation = cursor.string();
  if (version == 4) {
    cie.address_size = cursor.byte();
    uint8_t segment_size = cursor.byte();
    if (segment_size != 0 || (cie.address_size != 4 && cie.address_size != 8))
      return std::nullopt;
  }
  cie.code_alignment = cursor.uleb();
  cie.data_alignment = cursor.sleb();
  cie.return_address_register = version == 1 ? cursor.byte() : cursor.uleb();
  if (!cursor.ok() || cie.code_alignment == 0)
    return std::nullopt;
  if (augmentation == "S") {
    cie.signal_frame = true; // as the assembler writes it into .debug_frame
  } else if (!augmentation.empty()) {
    if (augmentation[0] != 'z')
      return std::nullopt; // an old augmentation whose data's length is unknown
    cie.has_augmentation_data = true;
    uint64_t length = cursor.uleb();
    if (!cursor.ok() || length > cursor.end() - cursor.position())
      return std::nullopt;
    ByteCursor data(cfi_.bytes, cursor.position(), cursor.position() + length);
    for (char letter : augmentation.substr(1)) {
      switch (letter) {
      case 'R':
        cie.pointer_encoding = data.byte();
        break;
      case 'L':
        data.byte();
        break; // the LSDA's encoding: unwinding needs no LSDA
      case 'P':
        // The personality routine, skipped: only its encoding's size matters.
        if (uint8_t encoding = data.byte(); encoding != kPointerOmit)
          read_pointer(data, encoding & 0x7f, cfi_.address, cie.address_size);
        break;
      case 'S':
        cie.signal_frame = true;
        break;
      default:
        break; // the rest of the data is skipped by its length
      }
      if (!data.ok())
        return std::nullopt;
    }
    cursor.block(length);
  }
  // The initial rules. A CIE that does not name the return address's rule leaves it where a call
  // leaves it (arch::kReturnAddressAtCfa).
  if (!run(cursor.position(), header->end, cie, cie.initial, 0, 0, nullptr))
    return std::nullopt;
  return cie;
}

const Cie* Builder::cie_at(uint64_t offset)
{
  if (offset >= cie_starts_.size() || !cie_starts_[offset])
    return nullptr;
  auto found = cies_.find(offset);
  if (found == cies_.end()) {
    if (cies_.size() >= kMaxCies)
      return nullptr;
    found = cies_.emplace(offset, parse_cie(offset)).first;
  }
  return found->second ? &*found->second : nullptr;
}

bool Builder::is_cie(const EntryHeader& header) const
{
  if (cfi_.eh_frame)
    return header.id == 0;
  return header.id == (header.wide ? ~uint64_t{0} : 0xffffffff);
}

template <class Visit> bool Builder::walk_entries(Visit visit)
{
  size_t offset = 0;
  while (offset < cfi_.bytes.size()) {
    auto header = read_entry_header(cfi_.bytes, offset);
    if (!header)
      return false;
    if (header->terminator && cfi_.eh_frame)
      return true;
    visit(offset, *header);
    offset = header->end;
  }
  return true;
}

void Builder::read_entries()
{
  cie_starts_.assign(cfi_.bytes.size(), false);
  walk_entries([&](size_t offset, const EntryHeader& header) {
    if (!header.terminator && header.id_ok && is_cie(header))
      cie_starts_[offset] = true;
  });
  bool whole = walk_entries([&](size_t entry, const EntryHeader& entry_header) {
    const EntryHeader* header = &entry_header;
    std::string_view bytes = cfi_.bytes;
    if (header->terminator || (header->id_ok && is_cie(*header)))
      return;
    ++counts_.fdes;
    if (!header->id_ok) {
      ++counts_.fdes_malformed;
      return;
    }
    uint64_t cie_offset = header->id;
    if (cfi_.eh_frame) {
      // .eh_frame's CIE pointer counts back from the pointer itself.
      if (header->id > header->id_offset) {
        ++counts_.fdes_malformed;
        return;
      }
      cie_offset = header->id_offset - header->id;
    }
    const Cie* cie = cie_offset < entry || !cfi_.eh_frame ? cie_at(cie_offset) : nullptr;
    if (!cie) {
      ++counts_.fdes_malformed;
      return;
    }
    ByteCursor cursor(bytes, header->id_offset + (header->wide ? 8 : 4), header->end);
    auto start = read_pointer(cursor, cie->pointer_encoding, cfi_.address, cie->address_size);
    // The range is a plain number: only the format part of the encoding applies.
    auto range = read_pointer(cursor, cie->pointer_encoding & 0x0f, 0, cie->address_size);
    if (!start || !range || *start + *range < *start) {
      ++counts_.fdes_malformed;
      return;
    }
    if (cie->has_augmentation_data)
      cursor.block(cursor.uleb());
    if (!cursor.ok()) {
      ++counts_.fdes_malformed;
      return;
    }
    if (*range == 0)
      return; // describes no code (a discarded function)
    if (spans_.size() >= kMaxCfiRows) {
      ++counts_.fdes_dropped;
      return;
    }
    spans_.push_back(FdeSpan{*start, *start + *range, static_cast<uint32_t>(cursor.position()),
                             static_cast<uint32_t>(header->end),
                             static_cast<uint32_t>(cie_offset)});
  });
  // A length past the end: nothing after it can be found. It counts as one FDE read, so that
  // no more are malformed than were read.
  if (!whole) {
    ++counts_.fdes;
    ++counts_.fdes_malformed;
  }
}

bool Builder::run(size_t begin,
                  size_t end,
                  const Cie& cie,
                  RuleState& state,
                  uint64_t start,
                  uint64_t limit,
                  RowSink* sink)
{
  ByteCursor cursor(cfi_.bytes, begin, end);
  std::vector<RuleState> remembered;
  uint64_t address = start;
  // Emits the rules that held up to next, then moves there. False when next is before the
  // current address, or when the rules after it no longer matter (past the FDE's end).
  bool stop = false;
  auto advance_to = [&](uint64_t next) {
    if (!sink)
      return true; // a CIE's initial instructions have no addresses
    if (next < address)
      return false;
    if (next > address) {
      auto row = row_for(state, cie.signal_frame);
      if (!row)
        ++sink->fallbacks;
      fb_unwind_row emitted = row.value_or(frame_pointer_row(0));
      emitted.pc_offset = static_cast<uint32_t>(address - sink->base);
      append_row(sink->rows, emitted);
      if (sink->rows.size() >= sink->max_rows) {
        sink->capped = true;
        return false;
      }
    }
    address = next;
    if (address >= limit)
      stop = true;
    return true;
  };
  auto advance_by = [&](uint64_t delta) {
    uint64_t scaled = 0;
    uint64_t next = 0;
    if (__builtin_mul_overflow(delta, cie.code_alignment, &scaled) ||
        __builtin_add_overflow(address, scaled, &next))
      return false;
    return advance_to(next);
  };
  auto rule_of = [&](uint64_t reg) -> RegisterRule* {
    if (reg == arch::kDwarfFp)
      return &state.fp;
    if (reg == cie.return_address_register)
      return &state.ra;
    return nullptr;
  };
  auto set_at_cfa = [&](uint64_t reg, int64_t offset) {
    if (RegisterRule* rule = rule_of(reg))
      *rule = {RegisterRule::at_cfa, offset};
  };
  auto set_kind = [&](uint64_t reg, RegisterRule::Kind kind) {
    if (RegisterRule* rule = rule_of(reg))
      *rule = {kind, 0};
  };
  auto restore = [&](uint64_t reg) {
    if (reg == arch::kDwarfFp)
      state.fp = cie.initial.fp;
    else if (reg == cie.return_address_register)
      state.ra = cie.initial.ra;
  };
  auto scaled_offset = [&](int64_t factor_offset, int64_t& out) {
    return !__builtin_mul_overflow(factor_offset, cie.data_alignment, &out);
  };

  dwarf::CfaEncoding encoding{cie.pointer_encoding, cfi_.address, cie.address_size};
  dwarf::CfaInstruction instruction;
  using Op = dwarf::CfaInstruction::Op;
  while (!cursor.at_end() && !stop) {
    if (!dwarf::decode_cfa_instruction(cursor, encoding, instruction))
      return false;
    bool ok = true;
    int64_t offset = 0;
    uint64_t reg = instruction.reg;
    switch (instruction.op) {
    case Op::kNop:
      break;
    case Op::kSetLoc:
      ok = advance_to(instruction.address);
      break;
    case Op::kAdvance:
      ok = advance_by(instruction.address);
      break;
    case Op::kOffset:
      ok = scaled_offset(instruction.offset, offset);
      set_at_cfa(reg, offset);
      break;
    case Op::kRestore:
      restore(reg);
      break;
    case Op::kUndefined:
      set_kind(reg, RegisterRule::undefined);
      break;
    case Op::kSameValue:
      set_kind(reg, RegisterRule::same);
      break;
    case Op::kOtherRule:
      set_kind(reg, RegisterRule::other);
      break;
    case Op::kRememberState:
      if (remembered.size() >= kMaxCfaStateDepth)
        return false;
      remembered.push_back(state);
      break;
    case Op::kRestoreState:
      if (remembered.empty())
        return false;
      state = remembered.back();
      remembered.pop_back();
      break;
    case Op::kDefCfa:
      state.cfa = {CfaRule::register_offset, reg, instruction.offset};
      break;
    case Op::kDefCfaFactored:
      state.cfa.reg = reg;
      ok = scaled_offset(instruction.offset, state.cfa.offset);
      state.cfa.kind = CfaRule::register_offset;
      break;
    case Op::kDefCfaRegister:
      state.cfa.reg = reg;
      state.cfa.kind = CfaRule::register_offset;
      break;
    case Op::kDefCfaOffset:
      state.cfa.offset = instruction.offset;
      break;
    case Op::kDefCfaOffsetFactored:
      ok = scaled_offset(instruction.offset, state.cfa.offset);
      break;
    case Op::kDefCfaExpression: {
      std::string_view expression = instruction.expression;
      bool plt =
          expression.size() == arch::kPltCfaExpression.size() &&
          std::memcmp(expression.data(), arch::kPltCfaExpression.data(), expression.size()) == 0;
      state.cfa.kind = plt ? CfaRule::plt : CfaRule::expression;
      break;
    }
    }
    if (!ok)
      return false;
  }
  if (sink && !stop)
    return advance_to(limit);
  return true;
}

Result<UnwindTable> Builder::build()
{
  read_entries();
  // Of FDEs that start at one address, the first in the section is taken.
  std::sort(spans_.begin(), spans_.end(), [](const FdeSpan& a, const FdeSpan& b) {
    return a.start != b.start ? a.start < b.start : a.instructions < b.instructions;
  });

  UnwindTable table;
  bool known_code = cfi_.code_end > cfi_.code_start;
  uint64_t code_start = cfi_.code_start;
  uint64_t code_end = cfi_.code_end;
  if (!known_code) {
    code_start = spans_.empty() ? 0 : spans_.front().start;
    code_end = code_start;
    for (const FdeSpan& span : spans_)
      code_end = std::max(code_end, span.end);
  }
  if (code_end - code_start > std::numeric_limits<uint32_t>::max())
    return fail(error("code spans more than 4 GiB"));
  table.base_address = code_start;

  std::vector<fb_unwind_row>& rows = table.rows;
  std::vector<fb_unwind_row> fde_rows;
  uint64_t covered = code_start; // the end of the last FDE taken
  rows.push_back(frame_pointer_row(0));
  for (size_t index = 0; index < spans_.size(); ++index) {
    const FdeSpan& span = spans_[index];
    if (span.start < covered || span.start < code_start || span.end > code_end) {
      ++counts_.fdes_dropped; // overlaps the last FDE, or describes no code of this file
      continue;
    }
    const Cie* cie = cie_at(span.cie);
    if (!cie) {
      ++counts_.fdes_malformed;
      continue;
    }
    // Two rows stay free: a gap's before the FDE and the table's end after it.
    if (rows.size() + 3 > kMaxCfiRows) {
      counts_.fdes_dropped += spans_.size() - index;
      break;
    }
    RuleState state = cie->initial;
    fde_rows.clear();
    RowSink sink{fde_rows, code_start, kMaxCfiRows - rows.size() - 2};
    if (!run(span.instructions, span.instructions_end, *cie, state, span.start, span.end, &sink)) {
      if (sink.capped) {
        counts_.fdes_dropped += spans_.size() - index;
        break;
      }
      ++counts_.fdes_malformed;
      continue;
    }
    counts_.rows_frame_pointer += sink.fallbacks;
    if (span.start > covered)
      append_row(rows, frame_pointer_row(static_cast<uint32_t>(covered - code_start)));
    for (const fb_unwind_row& row : fde_rows)
      append_row(rows, row);
    covered = span.end;
  }
  append_row(rows, frame_pointer_row(static_cast<uint32_t>(covered - code_start)));
  return table;
}

} // namespace

Result<CfiTable> build_cfi_table(const CfiSection& cfi)
{
  CfiTable built;
  built.counts.cfi_bytes = cfi.bytes.size();
  Builder builder(cfi, built.counts);
  auto table = builder.build();
  if (!table)
    return fail(table.error());
  built.table = std::move(*table);
  SipHash hash(content_hash_key());
  hash.update(uint64_t{cfi.eh_frame});
  hash.update(cfi.address);
  hash.update(cfi.code_start);
  hash.update(cfi.code_end);
  hash.update(cfi.bytes);
  if (cfi.load_segments) {
    for (const ElfSegment& segment : *cfi.load_segments) {
      hash.update(segment.offset);
      hash.update(segment.vaddr);
      hash.update(segment.file_size);
    }
  }
  built.content_key = hash.finish();
  return built;
}

Result<CfiTable> build_cfi_table(const ElfReader& elf)
{
  if (elf.machine() != arch::kElfMachine || !elf.is_64())
    return fail(error("cannot unwind " + elf.shown() + ": not an " + arch::kName + " file"));
  CfiSection cfi;
  std::vector<ElfSegment> load_segments;
  for (const ElfSegment& segment : elf.segments())
    if (segment.type == PT_LOAD)
      load_segments.push_back(segment);
  cfi.load_segments = &load_segments;
  uint64_t code_start = std::numeric_limits<uint64_t>::max();
  uint64_t code_end = 0;
  for (const ElfSegment& segment : elf.segments()) {
    if (segment.type != PT_LOAD || !(segment.flags & PF_X) || segment.file_size == 0)
      continue;
    code_start = std::min(code_start, segment.vaddr);
    code_end = std::max(code_end, segment.vaddr + std::min(segment.file_size, ~segment.vaddr));
  }
  if (code_end > code_start) {
    cfi.code_start = code_start;
    cfi.code_end = code_end;
  }
  const ElfSection* section = elf.section_named(".eh_frame");
  if (!section || section->type == SHT_NOBITS || section->size == 0) {
    section = elf.section_named(".debug_frame");
    cfi.eh_frame = false;
  }
  // A compressed .debug_frame (-gz) is not inflated: as if there were none.
  if (!section || section->type == SHT_NOBITS || section->size == 0 ||
      (section->flags & SHF_COMPRESSED))
    return build_cfi_table(cfi); // no CFI: one frame-pointer row
  auto content = elf.read_section(*section, kMaxCfiSectionBytes);
  if (!content)
    return fail(content.error());
  cfi.bytes = content->bytes;
  cfi.address = section->address;
  auto built = build_cfi_table(cfi);
  if (!built)
    return fail(error("cannot unwind " + elf.shown() + ": " + built.error().message));
  built->section = section->name;
  built->counts.section_cut = content->cut;
  return built;
}

} // namespace flamebpf::unwind
