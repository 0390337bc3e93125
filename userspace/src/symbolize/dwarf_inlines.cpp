#include "symbolize/dwarf_inlines.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <elf.h>
#include <functional>
#include <limits>
#include <optional>
#include <unordered_map>
#include <utility>
#include <zlib.h>

#include "common/byte_cursor.h"
#include "dwarf/abbreviations.h"
#include "dwarf/constants.h"
#include "dwarf/forms.h"
#include "dwarf/section_stream.h"
#include "dwarf/units.h"
#include "symbolize/demangle.h"
#include "symbolize/name_cut.h"

namespace flamebpf::symbolize {
namespace {

// The generic reader (sections, abbreviations, forms) is dwarf/'s; what is here is about inlines.
using namespace flamebpf::dwarf;

// One abbreviation table's bytes, and one range list's (its entries are at most 21 bytes).
constexpr size_t kMaxAbbrevTableBytes = 1 << 20;
constexpr size_t kMaxRangeListBytes = kMaxRangesPerList * 24;
static_assert(kMaxDwarfUnitBytes + 2 * (kMaxWindowBytes + kMaxRangeListBytes + kStreamBytes) +
                      2 * kMaxHeldSectionBytes <
                  kMaxInlineBuildBytes,
              "the pieces held at once leave room for the index");
static_assert(kMaxInlineIndexBytes < kMaxInlineBuildBytes);
// A name for an inlined call whose DWARF names nothing (or names it in a file not read), as
// addr2line shows one.
constexpr std::string_view kUnnamed = "??";

std::string in_mib(uint64_t bytes)
{
  return std::to_string(bytes >> 20) + " MiB";
}

// The attributes of one DIE this reader uses.
struct DieValues {
  Value name;
  Value linkage_name;
  Value low_pc;
  Value high_pc;
  bool high_pc_is_address = false;
  Value ranges;
  Value origin; // DW_AT_abstract_origin, else DW_AT_specification
  Value str_offsets_base;
  Value addr_base;
  Value rnglists_base;
};

// One inlined call (DW_TAG_inlined_subroutine) of the unit being read, numbered from 1 in it.
struct LocalCall {
  uint32_t name = 0;   // raw name, 0 for none
  uint32_t caller = 0; // the local call it is nested in, 0 at depth 1
  uint32_t depth = 0;
  uint32_t global = 0; // its number in the whole index, once it has a range
};

// What was skipped or cut, counted while reading and reported once each at the end.
struct Counts {
  uint64_t units_too_large = 0;
  uint64_t units_malformed = 0;
  uint64_t units_unsupported = 0;
  uint64_t units_split = 0;
  uint64_t calls_too_deep = 0;
  uint64_t dies_too_deep = 0;
  uint64_t lists_cut = 0;
  uint64_t lists_malformed = 0;
  uint64_t elsewhere = 0;
  uint64_t bad_strings = 0;
  uint64_t bad_addresses = 0;
  uint64_t overlaps = 0;
  uint64_t names_cut = 0;
  uint64_t names_left_mangled = 0;
  uint64_t lists_unread = 0;
  bool budget_reached = false;
  bool out_of_time = false;
  bool info_cut = false;
  bool info_ends_early = false;
};

// Lets a map keyed by std::string be searched with a string_view.
struct TextHash {
  using is_transparent = void;
  size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
};

// A range list left for after the units: where it is, whose it is (local call number until its
// unit is kept, then the index's), and its unit (in units_).
struct DeferredList {
  uint64_t offset = 0;
  uint32_t call = 0;
  uint32_t caller = 0;
  uint32_t unit = 0;
  uint32_t name = 0;
};

// How a range list read from a window ended.
enum class ListEnd : uint8_t { kEnded, kRanOut, kMalformed, kCut };

// A raw name's key when it lies in a string section: the offset, with the top bit for
// .debug_line_str.
constexpr uint64_t kLineStringKey = uint64_t{1} << 63;

template <class T> size_t bytes_of(const std::vector<T>& items)
{
  return items.capacity() * sizeof(T);
}

} // namespace

class InlineIndexBuilder {
public:
  InlineIndexBuilder(const ElfReader& reader,
                     uint64_t bias,
                     std::vector<std::string>& problems,
                     size_t budget,
                     const std::atomic<bool>* cancelled)
      : reader_(reader), bias_(bias), problems_(problems), budget_(budget),
        limit_(budget - budget / 8), cancelled_(cancelled)
  {
    // Ranges outside the file's code (functions the linker dropped keep address 0 or 1) would
    // shadow real ones.
    for (const auto& section : reader.sections()) {
      if ((section.flags & SHF_EXECINSTR) && (section.flags & SHF_ALLOC) && section.size > 0)
        code_.emplace_back(section.address, section.address + section.size);
    }
    std::sort(code_.begin(), code_.end());
  }

  Result<std::unique_ptr<InlineIndex>> build()
  {
    const ElfSection* info_section = find_section("info");
    if (!info_section)
      return fail(error("no .debug_info in " + reader_.shown()));
    SectionStream info;
    if (auto opened = info.open(reader_, *info_section, kMaxDebugInfoBytes); !opened)
      return fail(
          error("no usable .debug_info in " + reader_.shown() + ": " + opened.error().message));
    if (!open_window("abbrev", abbrevs_))
      return fail(error("no usable .debug_abbrev in " + reader_.shown()));
    open_window("ranges", ranges_);
    open_window("rnglists", range_lists_);
    string_offsets_ = load("str_offsets");
    addresses_ = load("addr");
    if (info.cut_by_budget())
      counts_.info_cut = true;
    uint64_t info_size = std::min(info.declared_size(), kMaxDebugInfoBytes);

    uint64_t offset = 0; // where the units read or passed over end
    auto deadline = std::chrono::steady_clock::now() + kMaxInlineBuildTime;
    UnitWalk walk(info);
    while (!counts_.budget_reached) {
      if (std::chrono::steady_clock::now() > deadline) {
        counts_.out_of_time = true;
        break;
      }
      if (cancelled_ && cancelled_->load(std::memory_order_relaxed))
        return fail(error(reader_.shown() + ": the index's build was called off"));
      auto extent = walk.next(unit_);
      if (!extent)
        break;
      if (extent->length > kMaxDwarfUnitBytes) {
        ++counts_.units_too_large;
        if (!walk.skip(*extent))
          break;
        offset = extent->end();
        continue;
      }
      // The unit's buffer grows to its length while the old one is still held.
      size_t unit_size = extent->header_size + extent->length;
      size_t growth = unit_size > unit_.capacity() ? unit_size : 0;
      if (held() + growth > limit_) {
        counts_.budget_reached = true;
        break;
      }
      if (!walk.read(unit_, *extent))
        break;
      size_t mark = ranges_held_.size();
      size_t list_mark = lists_.size();
      unit_calls_.clear();
      read_unit(unit_, *extent);
      if (counts_.budget_reached || !keep_unit(mark, list_mark)) {
        // A unit is kept whole or not at all, so that what the index holds is what DWARF says.
        counts_.budget_reached = true;
        ranges_held_.resize(mark);
        lists_.resize(list_mark);
        break;
      }
      ++units_read_;
      offset = extent->end();
    }
    switch (walk.end()) {
    case WalkEnd::kMalformed:
      ++counts_.units_malformed;
      break;
    case WalkEnd::kCut:
      counts_.info_ends_early = !info.cut_by_budget();
      break;
    case WalkEnd::kFailed:
      problems_.push_back(walk.error());
      break;
    case WalkEnd::kNone:
    case WalkEnd::kEnded:
      break;
    }
    info_fraction_ =
        info_size == 0 ? 1.0 : static_cast<double>(offset) / static_cast<double>(info_size);
    return finish();
  }

private:
  const ElfSection* find_section(std::string_view part) const
  {
    std::string name = ".debug_" + std::string(part);
    if (const ElfSection* section = reader_.section_named(name))
      return section;
    return reader_.section_named(".zdebug_" + std::string(part));
  }

  // Opens a side section to be read through window; false (with a problem unless it is absent)
  // if it cannot be.
  bool open_window(std::string_view part, Window& window)
  {
    const ElfSection* section = find_section(part);
    if (!section)
      return false;
    if (auto opened = window.open(reader_, *section, kMaxDwarfSectionBytes); !opened) {
      problems_.push_back(opened.error().message + " in " + reader_.shown());
      return false;
    }
    SectionStream probe;
    if (probe.open(reader_, *section, kMaxDwarfSectionBytes) && probe.cut_by_budget()) {
      problems_.push_back(section->name + " of " + reader_.shown() + " is larger than " +
                          in_mib(kMaxDwarfSectionBytes) + ", not read");
      window = Window{};
      return false;
    }
    return true;
  }

  // A side section whole, or "" (with a problem) if it cannot be read within its budget.
  std::string load(std::string_view part)
  {
    const ElfSection* section = find_section(part);
    if (!section)
      return {};
    SectionStream stream;
    if (auto opened = stream.open(reader_, *section, kMaxHeldSectionBytes); !opened) {
      problems_.push_back(opened.error().message + " in " + reader_.shown());
      return {};
    }
    if (stream.cut_by_budget()) {
      problems_.push_back(section->name + " of " + reader_.shown() + " is larger than " +
                          in_mib(kMaxHeldSectionBytes) + ", not read");
      return {};
    }
    std::string content;
    auto got = stream.pull(content, stream.declared_size());
    if (!got) {
      problems_.push_back(got.error().message);
      return {};
    }
    return content;
  }

  // What the build holds now, all pieces together, against budget_.
  size_t held() const
  {
    return unit_.capacity() + abbrevs_.held() + abbrev_table_.held() + ranges_.held() +
           range_lists_.held() + string_offsets_.capacity() + addresses_.capacity() + raw_bytes_ +
           bytes_of(unit_calls_) + bytes_of(depths_) + bytes_of(ranges_held_) + bytes_of(lists_) +
           bytes_of(units_) + bytes_of(list_) + lists_reserve() +
           kStreamBytes; // .debug_info's stream
  }

  // Room kept for the deferred lists not read yet: the ranges they are likely to add (four each,
  // a generous mean for gcc and clang) and the window they are read through. Units stop being
  // read while there is still room for their lists, so that a kept unit is read whole.
  size_t lists_reserve() const
  {
    if (reading_lists_)
      return 0; // the room kept is now being used
    size_t left = lists_.size();
    return left == 0 ? 0
                     : left * 4 * sizeof(InlineIndex::Range) + kMaxRangeListBytes + kStreamBytes;
  }

  // Makes room for one more item in items, within the budget (the old array is held while the
  // new one is filled); false if there is none.
  template <class T> bool room_for(std::vector<T>& items, size_t more = 1)
  {
    if (items.capacity() - items.size() >= more)
      return true;
    size_t wanted =
        std::max({items.size() + more, items.capacity() + items.capacity() / 2, size_t{64}});
    if (held() + wanted * sizeof(T) > limit_)
      return false;
    items.reserve(wanted);
    return true;
  }

  // An offset_size-wide entry of a table of offsets (str_offsets, addr) at base.
  std::optional<uint64_t>
  entry_at(std::string_view section, uint64_t base, uint64_t index, uint8_t size)
  {
    if (base > section.size() || index > (section.size() - base) / size)
      return std::nullopt;
    ByteCursor cursor(section, static_cast<size_t>(base + index * size));
    uint64_t entry = cursor.fixed(size);
    if (!cursor.ok())
      return std::nullopt;
    return entry;
  }

  std::optional<uint64_t> address_of(const Value& value, const Unit& unit)
  {
    if (value.kind == Kind::kAddress)
      return value.number;
    if (value.kind == Kind::kAddressIndex) {
      if (auto address = entry_at(addresses_, unit.addr_base, value.number, unit.address_size))
        return address;
      ++counts_.bad_addresses;
    }
    return std::nullopt;
  }

  // A raw (mangled) name's number, from 1; 0 if none. Names in string sections are kept as
  // offsets and read once, in order, at the end: only the names of inlined calls are ever held.
  uint32_t raw_name(const Value& value, const Unit& unit)
  {
    uint64_t key = 0;
    switch (value.kind) {
    case Kind::kString: {
      if (value.text.empty())
        return 0;
      std::string_view kept = value.text.substr(0, kMaxMangledBytes + 1);
      auto it = raw_by_text_.find(kept);
      if (it != raw_by_text_.end())
        return it->second;
      raw_texts_.emplace_back(kept);
      raw_bytes_ += 2 * kept.size() + 96;
      auto id = static_cast<uint32_t>(raw_texts_.size());
      raw_by_text_.emplace(std::string(kept), id);
      return id;
    }
    case Kind::kStringOffset:
      key = value.number & ~kLineStringKey;
      break;
    case Kind::kLineStringOffset:
      key = value.number | kLineStringKey;
      break;
    case Kind::kStringIndex: {
      auto offset =
          entry_at(string_offsets_, unit.str_offsets_base, value.number, unit.offset_size);
      if (!offset) {
        ++counts_.bad_strings;
        return 0;
      }
      key = *offset & ~kLineStringKey;
      break;
    }
    case Kind::kElsewhere:
      ++counts_.elsewhere;
      return 0;
    default:
      return 0;
    }
    auto [it, added] =
        raw_by_offset_.try_emplace(key, static_cast<uint32_t>(raw_texts_.size() + 1));
    if (added) {
      raw_texts_.emplace_back();
      // Its text is not known yet: a C++ name's usual size, held twice (raw and demangled).
      raw_bytes_ += 256;
    }
    return it->second;
  }

  // Where a reference leads (a DIE offset in .debug_info, plus 1), 0 if nowhere.
  uint64_t target_of(const Value& value, const Unit& unit)
  {
    if (value.kind == Kind::kUnitReference)
      return unit.offset + value.number + 1;
    if (value.kind == Kind::kInfoReference)
      return value.number + 1;
    if (value.kind == Kind::kElsewhere)
      ++counts_.elsewhere;
    return 0;
  }

  // A range of the call target (a local call while its unit is read, else target_).
  void add_range(uint64_t begin, uint64_t end, uint32_t call)
  {
    if (end <= begin)
      return;
    if (!code_.empty()) {
      auto it = std::upper_bound(code_.begin(), code_.end(),
                                 std::pair<uint64_t, uint64_t>{begin, UINT64_MAX});
      if (it == code_.begin() || begin >= std::prev(it)->second)
        return;
    }
    if (end - begin > UINT32_MAX) {
      ++counts_.bad_addresses;
      return;
    }
    if (!room_for(ranges_held_)) {
      counts_.budget_reached = true;
      return;
    }
    if (call == 0) {
      ranges_held_.push_back({begin + bias_, static_cast<uint32_t>(end - begin), target_.name,
                              target_.call, target_.caller});
      return;
    }
    const LocalCall& local = unit_calls_[call - 1];
    ranges_held_.push_back(
        {begin + bias_, static_cast<uint32_t>(end - begin), local.name, call, local.caller});
  }

  // The list at offset of window, read by parse into list_; the view grows while a list runs off
  // its end, up to kMaxRangeListBytes.
  template <class Parse> void read_list(Window& window, uint64_t offset, uint32_t call, Parse parse)
  {
    for (size_t length = kFirstView;; length = std::min(length * 8, kMaxRangeListBytes)) {
      auto view = window.view(offset, length);
      if (!view || view->empty()) {
        ++counts_.lists_malformed;
        return;
      }
      list_.clear();
      list_bad_ = 0;
      ListEnd end = parse(*view);
      if (end == ListEnd::kRanOut && view->size() == length && length < kMaxRangeListBytes)
        continue;
      if (end == ListEnd::kRanOut || end == ListEnd::kMalformed)
        ++counts_.lists_malformed;
      else if (end == ListEnd::kCut)
        ++counts_.lists_cut;
      counts_.bad_addresses += list_bad_;
      for (auto [begin, finish] : list_)
        add_range(begin, finish, call);
      return;
    }
  }

  // DWARF 2-4's .debug_ranges list at offset.
  void read_ranges(uint64_t offset, const Unit& unit, uint32_t call)
  {
    read_list(ranges_, offset, call, [&](std::string_view bytes) {
      ByteCursor cursor(bytes);
      uint64_t base = unit.base_address;
      uint64_t all_ones =
          unit.address_size == 8 ? UINT64_MAX : (uint64_t{1} << (8 * unit.address_size)) - 1;
      for (size_t entries = 0;; ++entries) {
        if (entries >= kMaxRangesPerList)
          return ListEnd::kCut;
        uint64_t begin = cursor.fixed(unit.address_size);
        uint64_t end = cursor.fixed(unit.address_size);
        if (!cursor.ok())
          return ListEnd::kRanOut;
        if (begin == 0 && end == 0)
          return ListEnd::kEnded;
        if (begin == all_ones) {
          base = end;
          continue;
        }
        list_.emplace_back(base + begin, base + end);
      }
    });
  }

  // DWARF 5's .debug_rnglists list at offset.
  void read_range_list(uint64_t offset, const Unit& unit, uint32_t call)
  {
    read_list(range_lists_, offset, call, [&](std::string_view bytes) {
      ByteCursor cursor(bytes);
      uint64_t base = unit.base_address;
      auto indexed = [&](uint64_t index) {
        return entry_at(addresses_, unit.addr_base, index, unit.address_size);
      };
      for (size_t entries = 0;; ++entries) {
        if (entries >= kMaxRangesPerList)
          return ListEnd::kCut;
        auto kind = static_cast<uint8_t>(cursor.fixed(1));
        std::optional<uint64_t> begin;
        std::optional<uint64_t> end;
        switch (kind) {
        case kRleEndOfList:
          return cursor.ok() ? ListEnd::kEnded : ListEnd::kRanOut;
        case kRleBaseAddressx:
          if (auto address = indexed(cursor.uleb()))
            base = *address;
          else
            ++list_bad_;
          continue;
        case kRleStartxEndx:
          begin = indexed(cursor.uleb());
          end = indexed(cursor.uleb());
          break;
        case kRleStartxLength:
          begin = indexed(cursor.uleb());
          if (uint64_t length = cursor.uleb(); begin)
            end = *begin + length;
          break;
        case kRleOffsetPair:
          begin = base + cursor.uleb();
          end = base + cursor.uleb();
          break;
        case kRleBaseAddress:
          base = cursor.fixed(unit.address_size);
          continue;
        case kRleStartEnd:
          begin = cursor.fixed(unit.address_size);
          end = cursor.fixed(unit.address_size);
          break;
        case kRleStartLength:
          begin = cursor.fixed(unit.address_size);
          end = *begin + cursor.uleb();
          break;
        default:
          return ListEnd::kMalformed;
        }
        if (!cursor.ok())
          return ListEnd::kRanOut;
        if (begin && end)
          list_.emplace_back(*begin, *end);
        else
          ++list_bad_;
      }
    });
  }

  // The attributes of the DIE whose abbreviation is abbrev, read from cursor; false if malformed.
  bool collect(ByteCursor& cursor, const Abbrev& abbrev, const Unit& unit, DieValues& die)
  {
    for (uint32_t i = 0; i < abbrev.count; ++i) {
      const AttributeSpec& spec = abbrev_table_.spec(abbrev.first + i);
      Value value;
      if (!read_form(cursor, spec.form, spec.implicit, unit, value))
        return false;
      switch (spec.name) {
      case kAtName:
        die.name = value;
        break;
      case kAtLinkageName:
      case kAtMipsLinkageName:
        die.linkage_name = value;
        break;
      case kAtLowPc:
        die.low_pc = value;
        break;
      case kAtHighPc:
        die.high_pc = value;
        die.high_pc_is_address = value.kind == Kind::kAddress || value.kind == Kind::kAddressIndex;
        break;
      case kAtRanges:
        die.ranges = value;
        break;
      case kAtAbstractOrigin:
        die.origin = value;
        break;
      case kAtSpecification:
        if (die.origin.kind == Kind::kNone)
          die.origin = value;
        break;
      case kAtStrOffsetsBase:
        die.str_offsets_base = value;
        break;
      case kAtAddrBase:
      case kAtGnuAddrBase:
        die.addr_base = value;
        break;
      case kAtRnglistsBase:
        die.rnglists_base = value;
        break;
      default:
        break;
      }
    }
    return true;
  }

  // The name of an inlined call: the first linkage name along its origin and specification links,
  // else the first plain name. The DIEs linked to are read again from the unit, which is held
  // whole, so no table of every function's DIE is kept; a link into another unit (DW_FORM_ref_addr
  // of LTO) ends the walk.
  uint32_t resolve(const DieValues& call, std::string_view bytes, const Unit& unit)
  {
    const Value* name = call.name.kind != Kind::kNone ? &call.name : nullptr;
    Value linkage = call.linkage_name;
    uint64_t next = target_of(call.origin, unit);
    DieValues linked;
    Value kept_name;
    for (size_t hop = 0; hop < kMaxNameHops && linkage.kind == Kind::kNone && next != 0; ++hop) {
      uint64_t at = next - 1;
      if (at < unit.offset || at - unit.offset >= bytes.size())
        break;
      ByteCursor cursor(bytes, static_cast<size_t>(at - unit.offset));
      const Abbrev* abbrev = abbrev_table_.find(cursor.uleb());
      linked = DieValues{};
      if (!cursor.ok() || !abbrev || !collect(cursor, *abbrev, unit, linked))
        break;
      linkage = linked.linkage_name;
      if (!name && linked.name.kind != Kind::kNone) {
        kept_name = linked.name;
        name = &kept_name;
      }
      next = target_of(linked.origin, unit);
    }
    if (uint32_t id = raw_name(linkage, unit))
      return id;
    return name ? raw_name(*name, unit) : 0;
  }

  // The abbreviation table at offset of .debug_abbrev, read through its window; false if
  // malformed or larger than kMaxAbbrevTableBytes.
  bool read_abbrevs(uint64_t offset)
  {
    abbrevs_.release();
    for (size_t length = kFirstView;; length = std::min(length * 8, kMaxAbbrevTableBytes)) {
      auto view = abbrevs_.view(offset, length);
      if (!view)
        return false;
      if (abbrev_table_.read(*view, 0))
        return true;
      if (view->size() < length || length >= kMaxAbbrevTableBytes)
        return false;
    }
  }

  // Numbers the calls of the unit just read in the whole index, and rewrites its ranges (from
  // mark) and deferred lists (from list_mark) to those numbers. false if the budget leaves no room.
  bool keep_unit(size_t mark, size_t list_mark)
  {
    if (depths_.size() + unit_calls_.size() >= UINT32_MAX - 1 ||
        !room_for(depths_, unit_calls_.size()))
      return false;
    for (auto& call : unit_calls_) {
      depths_.push_back(static_cast<uint8_t>(call.depth));
      call.global = static_cast<uint32_t>(depths_.size());
    }
    auto global = [&](uint32_t local) { return local ? unit_calls_[local - 1].global : 0; };
    for (size_t i = mark; i < ranges_held_.size(); ++i) {
      ranges_held_[i].call = global(ranges_held_[i].call);
      ranges_held_[i].caller = global(ranges_held_[i].caller);
    }
    for (size_t i = list_mark; i < lists_.size(); ++i) {
      const LocalCall& call = unit_calls_[lists_[i].call - 1];
      lists_[i].name = call.name;
      lists_[i].caller = global(call.caller);
      lists_[i].call = call.global;
    }
    return true;
  }

  void read_ranges_of(const DieValues& die, const Unit& unit, uint32_t call)
  {
    if (die.low_pc.kind != Kind::kNone && die.high_pc.kind != Kind::kNone) {
      auto low = address_of(die.low_pc, unit);
      if (!low)
        return;
      if (die.high_pc_is_address) {
        if (auto high = address_of(die.high_pc, unit))
          add_range(*low, *high, call);
      } else if (die.high_pc.kind == Kind::kConstant) {
        add_range(*low, *low + die.high_pc.number, call);
      }
      return;
    }
    if (die.ranges.kind == Kind::kNone)
      return;
    if (unit.version < 5) {
      if (die.ranges.kind == Kind::kSectionOffset || die.ranges.kind == Kind::kConstant)
        defer_list(die.ranges.number, unit, call);
      return;
    }
    if (die.ranges.kind == Kind::kSectionOffset) {
      defer_list(die.ranges.number, unit, call);
    } else if (die.ranges.kind == Kind::kRangeListIndex) {
      auto offset = rnglist_entry(unit, die.ranges.number);
      if (offset && *offset <= UINT64_MAX - unit.rnglists_base)
        defer_list(unit.rnglists_base + *offset, unit, call);
      else
        ++counts_.lists_malformed;
    }
  }

  // Range lists are read after the units, in the order of their offsets, in one pass over each
  // section: a unit's lists follow neither its DIEs' order nor the units', and going back in a
  // compressed section means inflating it again from its start.
  void defer_list(uint64_t offset, const Unit& unit, uint32_t call)
  {
    if (units_.empty() || units_.back().offset != unit.offset) {
      if (!room_for(units_)) {
        counts_.budget_reached = true;
        return;
      }
      units_.push_back(unit);
    }
    if (units_.size() > UINT32_MAX || !room_for(lists_)) {
      counts_.budget_reached = true;
      return;
    }
    lists_.push_back({offset, call, 0, static_cast<uint32_t>(units_.size() - 1), 0});
  }

  // Reads the lists deferred, in order, as far as the budget lets.
  void read_deferred_lists()
  {
    std::sort(lists_.begin(), lists_.end(), [this](const DeferredList& a, const DeferredList& b) {
      bool a5 = units_[a.unit].version >= 5;
      bool b5 = units_[b.unit].version >= 5;
      return a5 != b5 ? b5 : a.offset < b.offset;
    });
    // The units' budget cut is kept apart: the lists of the units read are read still.
    bool units_cut = counts_.budget_reached;
    counts_.budget_reached = false;
    reading_lists_ = true;
    for (const auto& list : lists_) {
      if (counts_.budget_reached) {
        ++counts_.lists_unread;
        continue;
      }
      const Unit& unit = units_[list.unit];
      target_ = {list.name, list.call, list.caller};
      if (unit.version < 5) {
        ranges_.release();
        read_ranges(list.offset, unit, 0);
      } else {
        range_lists_.release();
        read_range_list(list.offset, unit, 0);
      }
    }
    counts_.budget_reached = units_cut || counts_.budget_reached;
    lists_ = {};
    reading_lists_ = false;
    units_ = {};
  }

  // Entry index of the offsets table at the unit's DW_AT_rnglists_base.
  std::optional<uint64_t> rnglist_entry(const Unit& unit, uint64_t index)
  {
    if (index > kMaxRangeListBytes)
      return std::nullopt;
    uint64_t at = unit.rnglists_base + index * unit.offset_size;
    if (at < unit.rnglists_base)
      return std::nullopt;
    auto view = range_lists_.view(at, unit.offset_size);
    if (!view || view->size() < unit.offset_size)
      return std::nullopt;
    ByteCursor cursor(*view);
    return cursor.fixed(unit.offset_size);
  }

  // One unit: its header, then its DIEs in order, with an explicit stack of what encloses them.
  void read_unit(std::string_view bytes, const UnitExtent& extent)
  {
    UnitHeader header = read_unit_header(bytes, extent);
    switch (header.kind) {
    case UnitKind::kCode:
      break;
    case UnitKind::kTypes:
      return;
    case UnitKind::kSplit:
      ++counts_.units_split;
      return;
    case UnitKind::kUnsupported:
      ++counts_.units_unsupported;
      return;
    case UnitKind::kMalformed:
      ++counts_.units_malformed;
      return;
    }
    Unit unit = header.unit;
    uint64_t abbrev_offset = header.abbrev_offset;
    ByteCursor cursor(bytes, header.dies_at);
    // Units of one file often share a table; a bad one is remembered too, not read again.
    if (!abbrevs_tried_ || abbrev_offset != abbrev_offset_) {
      abbrevs_read_ = read_abbrevs(abbrev_offset);
      abbrev_offset_ = abbrev_offset;
      abbrevs_tried_ = true;
    }
    if (!abbrevs_read_) {
      ++counts_.units_malformed;
      return;
    }

    // What encloses a DIE: the inlined call it is in (0 for none) and that call's depth.
    struct Scope {
      uint32_t call = 0;
      uint32_t depth = 0;
      bool cut = false; // inside a call nested deeper than kMaxInlineDepth
    };
    std::vector<Scope> scopes{Scope{}};
    size_t untracked = 0; // levels past kMaxDieNesting, read but not looked at
    bool first = true;
    while (cursor.position() < bytes.size()) {
      uint64_t code = cursor.uleb();
      if (!cursor.ok()) {
        ++counts_.units_malformed;
        return;
      }
      if (code == 0) {
        if (untracked > 0)
          --untracked;
        else if (scopes.size() > 1)
          scopes.pop_back();
        continue;
      }
      const Abbrev* abbrev = abbrev_table_.find(code);
      if (!abbrev) {
        ++counts_.units_malformed;
        return;
      }
      DieValues die;
      if (!collect(cursor, *abbrev, unit, die)) {
        ++counts_.units_malformed;
        return;
      }
      if (untracked > 0) {
        if (abbrev->children)
          ++untracked;
        continue;
      }
      Scope inner = scopes.back();
      if (first) {
        first = false;
        if (abbrev->tag == kTagCompileUnit || abbrev->tag == kTagPartialUnit) {
          // The unit's bases first: its own attributes (a strx name) may need them.
          if (die.str_offsets_base.kind != Kind::kNone)
            unit.str_offsets_base = die.str_offsets_base.number;
          else if (unit.version >= 5)
            unit.str_offsets_base = 2u * unit.offset_size; // the table's header, when unstated
          if (die.addr_base.kind != Kind::kNone)
            unit.addr_base = die.addr_base.number;
          if (die.rnglists_base.kind != Kind::kNone)
            unit.rnglists_base = die.rnglists_base.number;
          if (auto low = address_of(die.low_pc, unit))
            unit.base_address = *low;
        }
      } else if (abbrev->tag == kTagSubprogram) {
        inner = Scope{};
      } else if (abbrev->tag == kTagInlinedSubroutine) {
        if (inner.cut || inner.depth >= kMaxInlineDepth) {
          if (!inner.cut)
            ++counts_.calls_too_deep;
          inner.cut = true;
        } else {
          if (unit_calls_.size() >= UINT32_MAX - 1 || !room_for(unit_calls_)) {
            counts_.budget_reached = true;
            return;
          }
          unit_calls_.push_back({resolve(die, bytes, unit), inner.call, inner.depth + 1, 0});
          inner.call = static_cast<uint32_t>(unit_calls_.size()); // numbered from 1
          inner.depth += 1;
          read_ranges_of(die, unit, inner.call);
          if (counts_.budget_reached || held() > limit_) {
            counts_.budget_reached = true;
            return;
          }
        }
      }
      if (abbrev->children) {
        if (scopes.size() >= kMaxDieNesting) {
          ++counts_.dies_too_deep;
          untracked = 1;
        } else {
          scopes.push_back(inner);
        }
      }
    }
  }

  // The texts of the raw names that lie in string sections, read in one pass over each.
  void read_section_names()
  {
    std::vector<std::pair<uint64_t, uint32_t>> wanted(raw_by_offset_.begin(), raw_by_offset_.end());
    raw_by_offset_.clear();
    std::sort(wanted.begin(), wanted.end());
    Window strings;
    bool line = false;
    bool usable = open_window("str", strings);
    for (const auto& [key, id] : wanted) {
      if ((key & kLineStringKey) && !line) {
        line = true;
        strings = Window{};
        usable = open_window("line_str", strings);
      }
      if (!usable) {
        ++counts_.bad_strings;
        continue;
      }
      uint64_t offset = key & ~kLineStringKey;
      strings.release();
      auto view = strings.view(offset, kMaxMangledBytes + 2);
      if (!view || view->empty()) {
        ++counts_.bad_strings;
        continue;
      }
      size_t end = view->find('\0');
      if (end == std::string_view::npos && view->size() < kMaxMangledBytes + 2) {
        ++counts_.bad_strings; // the section ends inside it
        continue;
      }
      raw_texts_[id - 1] = std::string(view->substr(0, std::min(end, kMaxMangledBytes + 1)));
    }
  }

  uint32_t final_name(uint32_t raw, InlineIndex& index)
  {
    if (raw < final_ids_.size() && final_ids_[raw] != 0)
      return final_ids_[raw] - 1;
    Demangled demangled;
    if (raw == 0 || raw_texts_[raw - 1].empty())
      demangled.text = std::string(kUnnamed);
    else if (demangling_time_ < kMaxDemanglingTime)
      demangled = demangle_timed(raw_texts_[raw - 1]);
    else
      demangled = left_mangled(raw_texts_[raw - 1]);
    auto [it, added] =
        final_by_text_.try_emplace(demangled.text, static_cast<uint32_t>(index.names_.size()));
    if (added) {
      index.names_.push_back({static_cast<uint32_t>(index.text_.size()),
                              static_cast<uint32_t>(demangled.text.size()), demangled.cut});
      index.text_ += demangled.text;
      if (demangled.cut)
        ++counts_.names_cut;
    }
    if (final_ids_.size() <= raw)
      final_ids_.resize(raw + 1);
    final_ids_[raw] = it->second + 1;
    return it->second;
  }

  Demangled left_mangled(const std::string& name)
  {
    if (name.starts_with("_Z"))
      ++counts_.names_left_mangled;
    Demangled kept;
    kept.cut = name.size() > kMaxInlineNameBytes;
    kept.text = cut_name(name, kMaxInlineNameBytes);
    return kept;
  }

  Demangled demangle_timed(const std::string& name)
  {
    auto started = std::chrono::steady_clock::now();
    Demangled demangled = demangle_bounded(name, kMaxInlineNameBytes);
    demangling_time_ += std::chrono::steady_clock::now() - started;
    return demangled;
  }

  Result<std::unique_ptr<InlineIndex>> finish()
  {
    // What reading units needed goes before names are read, so that they have its room.
    unit_ = std::string();
    unit_calls_ = {};
    abbrevs_ = Window{};
    abbrev_table_ = AbbrevTable{};
    read_deferred_lists();
    ranges_ = Window{};
    range_lists_ = Window{};
    raw_by_text_.clear();
    read_section_names();

    std::unique_ptr<InlineIndex> index(new InlineIndex());
    for (auto& range : ranges_held_)
      range.name = final_name(range.name, *index);
    raw_texts_ = {};
    final_ids_ = {};
    final_by_text_.clear();
    counts_.overlaps += index->lay_out(
        ranges_held_, [this](const InlineIndex::Range& range) { return depths_[range.call - 1]; });
    depths_ = {};
    // A copy to fit is made only while the budget leaves room for it beside the original.
    if (index->ranges_.capacity() - index->ranges_.size() > index->ranges_.size() / 8 &&
        held() + index->memory_bytes() + index->ranges_.size() * sizeof(InlineIndex::Range) <=
            limit_)
      index->ranges_.shrink_to_fit();
    index->names_.shrink_to_fit();
    index->text_.shrink_to_fit();
    index->overlaps_dropped_ = counts_.overlaps;
    index->units_read_ = units_read_;
    index->info_fraction_read_ = std::min(1.0, info_fraction_);
    if (index->memory_bytes() > kMaxInlineIndexBytes) {
      // Cannot happen within kMaxInlineBuildBytes' share for ranges, but a smaller index beats
      // an unbounded one.
      problems_.push_back("inline index of " + reader_.shown() + " held over " +
                          in_mib(kMaxInlineIndexBytes) + ", dropped");
      return fail(error("inline index of " + reader_.shown() + " too large"));
    }
    report();
    return index;
  }

  void report()
  {
    const std::string& shown = reader_.shown();
    auto say = [&](uint64_t count, const std::string& what) {
      if (count > 0)
        problems_.push_back(std::to_string(count) + " " + what + " in " + shown);
    };
    if (counts_.info_cut)
      problems_.push_back(".debug_info of " + shown + " read only to " +
                          in_mib(kMaxDebugInfoBytes));
    if (counts_.info_ends_early)
      problems_.push_back(".debug_info of " + shown + " ends inside a unit");
    if (counts_.out_of_time)
      problems_.push_back("inline index of " + shown + " took over " +
                          std::to_string(kMaxInlineBuildTime.count()) +
                          " s: the rest of .debug_info not read");
    say(counts_.names_left_mangled, "inlined function names left mangled (demangling took over " +
                                        std::to_string(kMaxDemanglingTime.count()) + " s)");
    if (counts_.budget_reached) {
      char share[16];
      std::snprintf(share, sizeof share, "%.0f", 100.0 * std::min(1.0, info_fraction_));
      problems_.push_back("inline index build of " + shown + " reached its memory budget (" +
                          std::to_string(budget_ >> 10) + " KiB held at once) after " +
                          std::to_string(units_read_) + " units, " + share +
                          " % of .debug_info: the rest not read");
    }
    say(counts_.lists_unread, "range lists of units read left unread (memory budget)");
    say(counts_.units_too_large,
        "DWARF units larger than " + in_mib(kMaxDwarfUnitBytes) + " skipped");
    say(counts_.units_malformed, "malformed DWARF units skipped (in part or whole)");
    say(counts_.units_unsupported, "DWARF units of unknown versions or kinds skipped");
    say(counts_.units_split, "split-DWARF units skipped (.dwo files are not read)");
    say(counts_.calls_too_deep,
        "inlined calls nested deeper than " + std::to_string(kMaxInlineDepth) + " cut");
    say(counts_.dies_too_deep,
        "DIEs nested deeper than " + std::to_string(kMaxDieNesting) + " not looked at");
    say(counts_.lists_cut,
        "range lists longer than " + std::to_string(kMaxRangesPerList) + " entries cut");
    say(counts_.lists_malformed, "malformed range lists");
    say(counts_.elsewhere, "names or references in a supplementary (dwz) file left unnamed");
    say(counts_.bad_strings, "DWARF strings missing or unterminated");
    say(counts_.bad_addresses, "DWARF addresses unreadable or out of range");
    say(counts_.names_cut, "inlined function names cut");
  }

  const ElfReader& reader_;
  uint64_t bias_;
  std::vector<std::string>& problems_;
  size_t budget_;
  // What held() may reach: the rest of budget_ is left to the allocator's own overhead (freed
  // blocks not yet reused, map nodes' headers), which held() does not see.
  size_t limit_;
  std::vector<std::pair<uint64_t, uint64_t>> code_; // [begin, end) of the executable sections

  std::string unit_;
  Window abbrevs_;
  Window ranges_;
  Window range_lists_;
  std::string string_offsets_;
  std::string addresses_;
  AbbrevTable abbrev_table_;
  uint64_t abbrev_offset_ = 0;
  bool abbrevs_tried_ = false;
  bool abbrevs_read_ = false;
  std::vector<std::pair<uint64_t, uint64_t>> list_; // the range list being read
  uint64_t list_bad_ = 0;

  std::unordered_map<std::string, uint32_t, TextHash, std::equal_to<>> raw_by_text_;
  std::unordered_map<uint64_t, uint32_t> raw_by_offset_;
  std::vector<std::string> raw_texts_; // by raw name - 1; those in sections read at the end
  size_t raw_bytes_ = 0;               // what the three above hold, roughly
  std::vector<LocalCall> unit_calls_;
  std::vector<uint8_t> depths_; // by call number - 1
  std::vector<InlineIndex::Range> ranges_held_;
  std::vector<DeferredList> lists_;
  std::vector<Unit> units_; // those with lists deferred
  bool reading_lists_ = false;
  struct {
    uint32_t name = 0;
    uint32_t call = 0;
    uint32_t caller = 0;
  } target_; // the call whose deferred list is being read
  size_t units_read_ = 0;
  double info_fraction_ = 0;

  std::vector<uint32_t> final_ids_; // by raw name, final name + 1
  std::chrono::steady_clock::duration demangling_time_{};
  std::unordered_map<std::string, uint32_t> final_by_text_;
  const std::atomic<bool>* cancelled_; // the build is called off when it turns true
  Counts counts_;
};

Result<std::unique_ptr<InlineIndex>> InlineIndex::build(const ElfReader& reader,
                                                        uint64_t bias,
                                                        std::vector<std::string>& problems,
                                                        size_t budget_bytes,
                                                        const std::atomic<bool>* cancelled)
{
  InlineIndexBuilder builder(reader, bias, problems, std::min(budget_bytes, kMaxInlineBuildBytes),
                             cancelled);
  return builder.build();
}

std::vector<InlineIndex::Inlined> InlineIndex::at(uint64_t address) const
{
  std::vector<Inlined> chain;
  uint32_t caller = 0;
  for (size_t depth = 0; depth + 1 < depth_begin_.size(); ++depth) {
    auto first = ranges_.begin() + depth_begin_[depth];
    auto last = ranges_.begin() + depth_begin_[depth + 1];
    auto it = std::upper_bound(first, last, address,
                               [](uint64_t at, const Range& range) { return at < range.begin; });
    if (it == first)
      break;
    --it;
    if (address - it->begin >= it->length || it->caller != caller)
      break;
    const Name& name = names_[it->name];
    chain.push_back({std::string_view(text_).substr(name.offset, name.length), name.cut});
    caller = it->call;
  }
  return chain;
}

size_t InlineIndex::lay_out(std::vector<Range>& ranges,
                            const std::function<uint32_t(const Range&)>& depth_of)
{
  // Sorted in place by depth, then address, longer first: the index is this one array.
  std::sort(ranges.begin(), ranges.end(), [&](const Range& a, const Range& b) {
    uint32_t depth_a = depth_of(a);
    uint32_t depth_b = depth_of(b);
    if (depth_a != depth_b)
      return depth_a < depth_b;
    return a.begin != b.begin ? a.begin < b.begin : a.length > b.length;
  });
  // Where ranges overlap, the first kept wins: a lookup finds one range per depth.
  size_t kept = 0;
  size_t overlaps = 0;
  uint64_t end = 0;
  uint32_t depth = 0;
  depth_begin_.clear();
  for (const auto& range : ranges) {
    uint32_t range_depth = depth_of(range);
    if (range_depth != depth) {
      while (depth < range_depth) {
        depth_begin_.push_back(static_cast<uint32_t>(kept));
        ++depth;
      }
    } else if (range.begin < end) {
      ++overlaps;
      continue;
    }
    ranges[kept++] = range;
    end = range.begin + range.length;
  }
  ranges.resize(kept);
  depth_begin_.push_back(static_cast<uint32_t>(kept));
  ranges_ = std::move(ranges);
  return overlaps;
}

size_t InlineIndex::memory_bytes() const
{
  return sizeof(*this) + text_.capacity() + names_.capacity() * sizeof(Name) +
         ranges_.capacity() * sizeof(Range) + depth_begin_.capacity() * sizeof(uint32_t);
}

size_t InlineIndex::ranges() const
{
  return ranges_.size();
}

} // namespace flamebpf::symbolize
