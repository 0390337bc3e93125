#include "runtimes/cpython/cpython_file.h"

#include <array>
#include <charconv>
#include <cstring>

#include "common/exported_objects.h"

namespace flamebpf::cpython {

namespace {

// major.minor from a file name python3.11, python3.11d, libpython3.11.so.1.0 (its last component).
std::optional<std::pair<uint32_t, uint32_t>> version_in_name(std::string_view path)
{
  std::string_view name = path.substr(path.rfind('/') + 1);
  for (std::string_view prefix : {"libpython", "python"}) {
    if (!name.starts_with(prefix))
      continue;
    name.remove_prefix(prefix.size());
    uint32_t major = 0;
    uint32_t minor = 0;
    auto [after_major, major_error] =
        std::from_chars(name.data(), name.data() + name.size(), major);
    if (major_error != std::errc{} || after_major == name.data() + name.size() ||
        *after_major != '.')
      return std::nullopt;
    auto [after_minor, minor_error] =
        std::from_chars(after_major + 1, name.data() + name.size(), minor);
    if (minor_error != std::errc{} || after_minor == after_major + 1)
      return std::nullopt;
    return std::make_pair(major, minor);
  }
  return std::nullopt;
}

// Whether a version could be a CPython's: 2.x or 3.x with a minor version of its releases' size.
bool plausible(uint32_t major, uint32_t minor)
{
  return (major == 2 || major == 3) && minor < 100;
}

} // namespace

std::string CPythonFile::version() const
{
  std::string text = std::to_string(major) + "." + std::to_string(minor);
  return version_from_name ? text : text + "." + std::to_string(micro);
}

Result<std::optional<CPythonFile>> find_cpython(const ElfReader& elf, std::string_view path)
{
  constexpr std::array<std::string_view, 5> kNames{"_PyRuntime", "Py_Version", "PyCode_Type",
                                                   "PyUnicode_Type", "PyBytes_Type"};
  auto exported = exported_objects(elf, 0, kNames);
  if (!exported)
    return std::optional<CPythonFile>{}; // no dynamic symbols: no CPython exports its state
  const auto& runtime = (*exported)[0];
  const auto& version = (*exported)[1];
  if (!runtime)
    return std::optional<CPythonFile>{};
  for (size_t i = 2; i < kNames.size(); ++i) {
    if (!(*exported)[i])
      return fail(error(elf.shown() + ": it exports _PyRuntime but no " + std::string(kNames[i])));
  }
  CPythonFile found;
  found.in_file = {runtime->file_vaddr, (*exported)[2]->file_vaddr, (*exported)[3]->file_vaddr,
                   (*exported)[4]->file_vaddr};
  if (version) {
    // A constant: its bytes are in the file.
    auto at = elf.file_offset_of(version->file_vaddr);
    if (!at || at->second < sizeof(uint64_t) || version->size != sizeof(uint64_t))
      return fail(error(elf.shown() + ": its Py_Version is not an 8-byte constant in the file"));
    auto bytes = elf.bytes().read(at->first, sizeof(uint64_t));
    if (!bytes)
      return fail(bytes.error());
    uint64_t hex = 0;
    std::memcpy(&hex, bytes->data(), sizeof hex);
    found.major = static_cast<uint32_t>((hex >> 24) & 0xff);
    found.minor = static_cast<uint32_t>((hex >> 16) & 0xff);
    found.micro = static_cast<uint32_t>((hex >> 8) & 0xff);
    if (hex > UINT32_MAX || !plausible(found.major, found.minor))
      return fail(error(elf.shown() + ": its Py_Version, " + std::to_string(hex) +
                        ", is no CPython version"));
    return std::optional<CPythonFile>(found);
  }
  auto named = version_in_name(path);
  if (!named || !plausible(named->first, named->second))
    return fail(error(elf.shown() + ": it exports _PyRuntime, but neither Py_Version nor its name "
                                    "says which CPython it is"));
  found.major = named->first;
  found.minor = named->second;
  found.version_from_name = true;
  return std::optional<CPythonFile>(found);
}

} // namespace flamebpf::cpython
