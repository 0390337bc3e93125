#include "vm_structs.h"

#include <cstring>
#include <dlfcn.h>

namespace flamebpf::agent {
namespace {

// The tables have some thousand entries; more means the layout was misread.
constexpr size_t kMaxEntries = 1 << 16;

template <class T> T at(const void* base, uint64_t offset)
{
  T value;
  std::memcpy(&value, static_cast<const char*>(base) + offset, sizeof value);
  return value;
}

std::string text_at(const void* base, uint64_t offset)
{
  const char* text = at<const char*>(base, offset);
  return text ? std::string(text, strnlen(text, 256)) : std::string();
}

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
  Layout layout;
  bool missing = false;
  auto pointer = [&](const char* symbol) -> const void* {
    auto* where = static_cast<const void* const*>(dlsym(handle, symbol));
    if (!where || !*where) {
      if (!missing)
        *error = std::string(info.dli_fname) + " exports no " + symbol;
      missing = true;
      return nullptr;
    }
    return *where;
  };
  auto number = [&](const char* symbol) -> uint64_t {
    auto* where = static_cast<const uint64_t*>(dlsym(handle, symbol));
    if (!where) {
      if (!missing)
        *error = std::string(info.dli_fname) + " exports no " + symbol;
      missing = true;
      return 0;
    }
    return *where;
  };
  layout.structs = pointer("gHotSpotVMStructs");
  layout.struct_type_name = number("gHotSpotVMStructEntryTypeNameOffset");
  layout.struct_field_name = number("gHotSpotVMStructEntryFieldNameOffset");
  layout.struct_type_string = number("gHotSpotVMStructEntryTypeStringOffset");
  layout.struct_is_static = number("gHotSpotVMStructEntryIsStaticOffset");
  layout.struct_offset = number("gHotSpotVMStructEntryOffsetOffset");
  layout.struct_address = number("gHotSpotVMStructEntryAddressOffset");
  layout.struct_stride = number("gHotSpotVMStructEntryArrayStride");
  layout.types = pointer("gHotSpotVMTypes");
  layout.type_name = number("gHotSpotVMTypeEntryTypeNameOffset");
  layout.type_size = number("gHotSpotVMTypeEntrySizeOffset");
  layout.type_stride = number("gHotSpotVMTypeEntryArrayStride");
  // libjvm stays loaded while the JVM runs: dropping the reference only undoes the dlopen above.
  dlclose(handle);
  if (missing)
    return std::nullopt;
  if (layout.struct_stride == 0 || layout.type_stride == 0) {
    *error = "libjvm's VMStructs have no stride";
    return std::nullopt;
  }
  return from_layout(layout);
}

VmStructs VmStructs::from_layout(const Layout& layout)
{
  VmStructs structs;
  const char* entry = static_cast<const char*>(layout.structs);
  for (size_t i = 0; entry && i < kMaxEntries; ++i, entry += layout.struct_stride) {
    if (!at<const char*>(entry, layout.struct_type_name))
      break;
    NamedField named;
    named.type_name = text_at(entry, layout.struct_type_name);
    named.field_name = text_at(entry, layout.struct_field_name);
    named.field.type = text_at(entry, layout.struct_type_string);
    named.field.is_static = at<int32_t>(entry, layout.struct_is_static) != 0;
    named.field.offset = at<uint64_t>(entry, layout.struct_offset);
    named.field.address = reinterpret_cast<uint64_t>(at<const void*>(entry, layout.struct_address));
    structs.fields_.push_back(std::move(named));
  }
  entry = static_cast<const char*>(layout.types);
  for (size_t i = 0; entry && i < kMaxEntries; ++i, entry += layout.type_stride) {
    if (!at<const char*>(entry, layout.type_name))
      break;
    structs.sizes_.emplace_back(text_at(entry, layout.type_name),
                                at<uint64_t>(entry, layout.type_size));
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
