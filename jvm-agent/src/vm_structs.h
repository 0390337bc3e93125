// HotSpot's own description of its types (the VMStructs table that the serviceability agent
// reads), looked up inside the JVM by type and field name. The names are HotSpot's contract with
// its debuggers, so a JDK that renames or drops one shows up here as a missing name, and whatever
// needs it is not done (nothing is guessed). Knows nothing of JVMTI, so it is testable on its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vm_memory.h"

namespace flamebpf::agent {

// One field of a HotSpot type: its offset in an object, or for a static field its address.
struct VmField {
  std::string type; // the field's C++ type as HotSpot writes it ("int", "address", ...)
  bool is_static = false;
  uint64_t offset = 0;  // non-static: bytes from the object's start
  uint64_t address = 0; // static: where the value lives
};

class VmStructs {
public:
  // Reads the tables of the libjvm that contains address_in_libjvm (any code address of it,
  // e.g. a JVMTI function). nullopt, with why in *error, if libjvm exports no tables.
  static std::optional<VmStructs> of_libjvm(const void* address_in_libjvm, std::string* error);

  // The layout of the exported tables, as libjvm's g* symbols give it: each table is an array of
  // entries of *_stride bytes ending in one whose type name is null.
  struct Layout {
    uint64_t structs = 0; // gHotSpotVMStructs
    uint64_t struct_type_name = 0, struct_field_name = 0, struct_type_string = 0,
             struct_is_static = 0, struct_offset = 0, struct_address = 0, struct_stride = 0;
    uint64_t types = 0; // gHotSpotVMTypes
    uint64_t type_name = 0, type_size = 0, type_stride = 0;
  };
  // The names of libjvm's symbols that hold the layout, in the order of Layout's members.
  static constexpr const char* kLayoutSymbols[] = {"gHotSpotVMStructs",
                                                   "gHotSpotVMStructEntryTypeNameOffset",
                                                   "gHotSpotVMStructEntryFieldNameOffset",
                                                   "gHotSpotVMStructEntryTypeStringOffset",
                                                   "gHotSpotVMStructEntryIsStaticOffset",
                                                   "gHotSpotVMStructEntryOffsetOffset",
                                                   "gHotSpotVMStructEntryAddressOffset",
                                                   "gHotSpotVMStructEntryArrayStride",
                                                   "gHotSpotVMTypes",
                                                   "gHotSpotVMTypeEntryTypeNameOffset",
                                                   "gHotSpotVMTypeEntrySizeOffset",
                                                   "gHotSpotVMTypeEntryArrayStride"};
  // The layout from the values of kLayoutSymbols, in that order (the two tables' addresses are
  // pointers held by their symbols, the rest numbers); nullopt, with why in *error, if a table
  // is missing or has no stride.
  static std::optional<Layout> layout_of(const uint64_t (&values)[12], std::string* error);
  // Reads tables laid out as layout says from memory, with at most max_entries entries each:
  // HotSpot's have a few thousand, and more means the layout was misread (or forged).
  static VmStructs
  from_layout(const Layout& layout, const VmMemory& memory, size_t max_entries = 1 << 16);

  // The field type::name, if the JVM lists it.
  const VmField* field(std::string_view type, std::string_view name) const;
  // sizeof(type), if the JVM lists it.
  std::optional<uint64_t> type_size(std::string_view type) const;
  // How many fields and types the tables hold.
  size_t fields() const { return fields_.size(); }
  size_t types() const { return sizes_.size(); }

private:
  struct NamedField {
    std::string type_name;
    std::string field_name;
    VmField field;
  };
  std::vector<NamedField> fields_;
  std::vector<std::pair<std::string, uint64_t>> sizes_;
};

} // namespace flamebpf::agent
