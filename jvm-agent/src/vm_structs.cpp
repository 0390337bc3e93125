#include "vm_structs.h"

#include <cstring>
#include <dlfcn.h>

namespace flamebpf::agent {
namespace {

// The longest type or field name read; HotSpot's longest are under 100 bytes.
constexpr size_t kMaxName = 256;

} // namespace

std::optional<VmStructs> VmStructs::of_libjvm(const void* address_in_libjvm, std::string* error)
{
  Dl_info info{};
  if (!dladdr(address_in_libjvm, &info) || !info.dli_fname) {
    *error = "cannot find libjvm";
    return std::nullopt;
  }
  // RTLD_NOLOAD: only the library already loaded; a JVM embedded with RTLD_LOCAL does not put its
  // symbols in the global scope, so they are looked up in libjvm itself.
  void* handle = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  if (!handle) {
    *error = std::string("cannot reopen ") + info.dli_fname;
    return std::nullopt;
  }
  uint64_t values[12] = {};
  bool missing = false;
  for (size_t i = 0; i < 12 && !missing; ++i) {
    auto* where = static_cast<const uint64_t*>(dlsym(handle, kLayoutSymbols[i]));
    if (!where) {
      *error = std::string(info.dli_fname) + " exports no " + kLayoutSymbols[i];
      missing = true;
    } else {
      values[i] = *where;
    }
  }
  // libjvm stays loaded while the JVM runs: dropping the reference only undoes the dlopen above.
  dlclose(handle);
  if (missing)
    return std::nullopt;
  auto layout = layout_of(values, error);
  if (!layout)
    return std::nullopt;
  return from_layout(*layout, OwnMemory());
}

std::optional<VmStructs::Layout> VmStructs::layout_of(const uint64_t (&values)[12],
                                                      std::string* error)
{
  Layout layout;
  layout.structs = values[0];
  layout.struct_type_name = values[1];
  layout.struct_field_name = values[2];
  layout.struct_type_string = values[3];
  layout.struct_is_static = values[4];
  layout.struct_offset = values[5];
  layout.struct_address = values[6];
  layout.struct_stride = values[7];
  layout.types = values[8];
  layout.type_name = values[9];
  layout.type_size = values[10];
  layout.type_stride = values[11];
  if (!layout.structs || !layout.types) {
    *error = "libjvm's VMStructs tables are not set up";
    return std::nullopt;
  }
  if (layout.struct_stride == 0 || layout.type_stride == 0) {
    *error = "libjvm's VMStructs have no stride";
    return std::nullopt;
  }
  return layout;
}

VmStructs VmStructs::from_layout(const Layout& layout, const VmMemory& memory, size_t max_entries)
{
  VmStructs structs;
  auto name_at = [&](uint64_t entry, uint64_t offset) -> std::optional<std::string> {
    auto pointer = memory.load<uint64_t>(entry + offset);
    if (!pointer)
      return std::nullopt;
    if (*pointer == 0)
      return std::string();
    return memory.text(*pointer, kMaxName);
  };
  uint64_t entry = layout.structs;
  for (size_t i = 0; i < max_entries; ++i, entry += layout.struct_stride) {
    auto type_pointer = memory.load<uint64_t>(entry + layout.struct_type_name);
    if (!type_pointer || *type_pointer == 0)
      break;
    auto type_name = memory.text(*type_pointer, kMaxName);
    auto field_name = name_at(entry, layout.struct_field_name);
    auto type_string = name_at(entry, layout.struct_type_string);
    auto is_static = memory.load<int32_t>(entry + layout.struct_is_static);
    auto offset = memory.load<uint64_t>(entry + layout.struct_offset);
    auto address = memory.load<uint64_t>(entry + layout.struct_address);
    if (!type_name || !field_name || !type_string || !is_static || !offset || !address)
      break;
    NamedField named;
    named.type_name = std::move(*type_name);
    named.field_name = std::move(*field_name);
    named.field.type = std::move(*type_string);
    named.field.is_static = *is_static != 0;
    named.field.offset = *offset;
    named.field.address = *address;
    structs.fields_.push_back(std::move(named));
  }
  entry = layout.types;
  for (size_t i = 0; i < max_entries; ++i, entry += layout.type_stride) {
    auto type_pointer = memory.load<uint64_t>(entry + layout.type_name);
    if (!type_pointer || *type_pointer == 0)
      break;
    auto type_name = memory.text(*type_pointer, kMaxName);
    auto size = memory.load<uint64_t>(entry + layout.type_size);
    if (!type_name || !size)
      break;
    structs.sizes_.emplace_back(std::move(*type_name), *size);
  }
  return structs;
}

const VmField* VmStructs::field(std::string_view type, std::string_view name) const
{
  for (const auto& named : fields_) {
    if (named.type_name == type && named.field_name == name)
      return &named.field;
  }
  return nullptr;
}

std::optional<uint64_t> VmStructs::type_size(std::string_view type) const
{
  for (const auto& [name, size] : sizes_) {
    if (name == type)
      return size;
  }
  return std::nullopt;
}

} // namespace flamebpf::agent
