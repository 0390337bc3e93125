// CPython found in real interpreters' files (Debian's python3.11, the builds pyenv made here), its
// version told by what the file exports and refused where a forged file exports nonsense; and the
// layout of each version held, checked against what that version's own headers say
// (tests/progs/cpython_offsets.c, built against each CPython's headers at hand) and, from 3.13,
// against what a real build's _Py_DebugOffsets say.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <gtest/gtest.h>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>

#include "common/text.h"
#include "runtimes/cpython/cpython_file.h"
#include "runtimes/cpython/cpython_layout.h"
#include "runtimes/cpython/debug_offsets.h"
#include "test_support.h"

namespace flamebpf::cpython {
namespace {

namespace fs = std::filesystem;

// What find_cpython says of the file at path.
Result<std::optional<CPythonFile>> find_in(const std::string& path)
{
  auto elf = testing::open_elf(path);
  if (!elf)
    return fail(elf.error());
  return find_cpython(elf->reader, path);
}

// The pyenv build of version (say "3.11"), its libpython; "" if pyenv built none here.
std::string pyenv_library(const std::string& version)
{
  const char* home = ::getenv("HOME");
  fs::path versions = fs::path(home ? home : "/root") / ".pyenv" / "versions";
  std::error_code failed;
  for (const auto& entry : fs::directory_iterator(versions, failed)) {
    std::string name = entry.path().filename().string();
    fs::path library = entry.path() / "lib" / ("libpython" + version + ".so.1.0");
    if (name.starts_with(version + ".") && fs::exists(library))
      return library.string();
  }
  return "";
}

TEST(CPythonFile, DebiansInterpreterIsFoundByWhatItExports)
{
  auto found = find_in("/usr/bin/python3.11");
  ASSERT_TRUE(found) << found.error().message;
  ASSERT_TRUE(found->has_value());
  const CPythonFile& python = **found;
  EXPECT_EQ(python.major, 3u);
  EXPECT_EQ(python.minor, 11u);
  EXPECT_FALSE(python.version_from_name);
  EXPECT_NE(python.in_file.runtime, 0u);
  EXPECT_NE(python.in_file.code_type, 0u);
  EXPECT_NE(python.in_file.str_type, 0u);
  EXPECT_NE(python.in_file.bytes_type, 0u);
  // The version the interpreter itself reports.
  FILE* out =
      ::popen("/usr/bin/python3.11 -c 'import platform; print(platform.python_version())'", "r");
  ASSERT_NE(out, nullptr);
  char line[64] = {};
  ASSERT_NE(::fgets(line, sizeof line, out), nullptr);
  ::pclose(out);
  EXPECT_EQ(python.version(), text::trim(line, " \t\n"));
}

TEST(CPythonFile, SharedLibrariesOfEachVersionAreFoundAndOnlyVerifiedLayoutsHeld)
{
  bool any = false;
  for (std::string version : {"3.10", "3.11", "3.12", "3.13"}) {
    std::string library = pyenv_library(version);
    if (library.empty())
      continue;
    any = true;
    auto found = find_in(library);
    ASSERT_TRUE(found) << library << ": " << found.error().message;
    ASSERT_TRUE(found->has_value()) << library;
    const CPythonFile& python = **found;
    EXPECT_EQ(std::to_string(python.major) + "." + std::to_string(python.minor), version);
    // Py_Version came with 3.11; before it, the name tells.
    EXPECT_EQ(python.version_from_name, version == "3.10") << library;
    EXPECT_EQ(verified_layout(python.major, python.minor).has_value(), version != "3.10");
  }
  if (!any)
    GTEST_SKIP() << "pyenv built no CPython here";
}

TEST(CPythonFile, OtherFilesAreNoCPythonAndAForgedOneIsRefused)
{
  auto plain = find_in("/usr/bin/true");
  ASSERT_TRUE(plain) << plain.error().message;
  EXPECT_FALSE(plain->has_value());
  auto forged = find_in(FLAMEBPF_FORGED_PYTHON);
  ASSERT_FALSE(forged);
  EXPECT_NE(forged.error().message.find("no CPython version"), std::string::npos)
      << forged.error().message;
}

// Each field of the layout against the offsets a program built on that CPython's headers prints.
TEST(CPythonLayout, EveryVerifiedFieldIsWhereTheVersionsOwnHeadersPutIt)
{
  std::stringstream programs(FLAMEBPF_CPYTHON_OFFSETS);
  size_t checked = 0;
  size_t debug_sets = 0;
  std::set<std::string> versions;
  for (std::string program; std::getline(programs, program, ':');) {
    if (program.empty())
      continue;
    FILE* out = ::popen(program.c_str(), "r");
    ASSERT_NE(out, nullptr) << program;
    std::map<std::string, uint32_t> offsets; // "none": kNoField
    std::map<std::string, uint32_t> debug_positions;
    std::string version;
    char line[256];
    while (::fgets(line, sizeof line, out)) {
      std::istringstream fields(line);
      std::string name;
      std::string value;
      fields >> name >> value;
      if (name == "version")
        version = value;
      else if (name.starts_with("debug."))
        debug_positions[name.substr(6)] = static_cast<uint32_t>(std::stoul(value));
      else
        offsets[name] = value == "none" ? kNoField : static_cast<uint32_t>(std::stoul(value));
    }
    ASSERT_EQ(::pclose(out), 0) << program;
    ASSERT_TRUE(version.starts_with("3.")) << program;
    auto minor = static_cast<uint32_t>(std::stoul(version.substr(2)));
    auto layout = verified_layout(3, minor);
    ASSERT_TRUE(layout) << program << ": " << version;
    // From 3.13, where _Py_DebugOffsets keep each field, as debug_offsets.cpp reads them.
    std::map<std::string, uint32_t> read_at;
    for (const auto& field : debug_offset_fields(minor))
      read_at[std::string(field.name)] = field.position;
    EXPECT_EQ(read_at, debug_positions) << program;
    EXPECT_EQ(read_at.empty(), minor < 13) << program;
    debug_sets += !read_at.empty();
    const std::map<std::string, uint32_t> held{
        {"object_type", layout->object_type},
        {"runtime_interpreters_head", layout->runtime_interpreters_head},
        {"runtime_gil_holder", layout->runtime_gil_holder},
        {"interpreter_next", layout->interpreter_next},
        {"interpreter_threads_head", layout->interpreter_threads_head},
        {"thread_next", layout->thread_next},
        {"thread_interpreter", layout->thread_interpreter},
        {"thread_native_id", layout->thread_native_id},
        {"thread_frame", layout->thread_frame},
        {"cframe_current_frame", layout->cframe_current_frame},
        {"frame_code", layout->frame_code},
        {"frame_previous", layout->frame_previous},
        {"frame_instruction", layout->frame_instruction},
        {"frame_is_entry", layout->frame_is_entry},
        {"frame_owner", layout->frame_owner},
        {"code_first_line", layout->code_first_line},
        {"code_filename", layout->code_filename},
        {"code_name", layout->code_name},
        {"code_qualname", layout->code_qualname},
        {"code_line_table", layout->code_line_table},
        {"code_instructions", layout->code_instructions},
        {"str_length", layout->str_length},
        {"str_state", layout->str_state},
        {"str_ascii_data", layout->str_ascii_data},
        {"str_compact_data", layout->str_compact_data},
        {"bytes_size", layout->bytes_size},
        {"bytes_data", layout->bytes_data},
    };
    EXPECT_EQ(offsets.size(), held.size()) << program;
    for (const auto& [name, offset] : held) {
      ASSERT_TRUE(offsets.contains(name)) << program << ": " << name;
      EXPECT_EQ(offsets.at(name), offset) << program << ": " << name;
    }
    versions.insert(version);
    ++checked;
  }
  // Debian's python3.11-dev at least; and every version with a layout whose headers are here.
  EXPECT_GE(checked, 1u);
  std::printf("[ CHECKED  ] %zu header sets of CPython", checked);
  for (const auto& version : versions)
    std::printf(" %s", version.c_str());
  std::printf(", %zu with _Py_DebugOffsets\n", debug_sets);
}

// The _PyRuntime pyenv's 3.13 starts with, as its file holds it.
std::optional<std::pair<CPythonFile, std::string>> pyenv_runtime_start(const std::string& version)
{
  std::string library = pyenv_library(version);
  if (library.empty())
    return std::nullopt;
  auto elf = testing::open_elf(library);
  EXPECT_TRUE(elf) << library;
  if (!elf)
    return std::nullopt;
  auto found = find_cpython(elf->reader, library);
  EXPECT_TRUE(found && found->has_value()) << library;
  if (!found || !found->has_value())
    return std::nullopt;
  auto start = read_runtime_start(elf->reader, **found);
  EXPECT_TRUE(start) << library;
  if (!start)
    return std::nullopt;
  return std::make_pair(**found, *start);
}

TEST(CPythonDebugOffsets, ARealBuildAgreesWithItsVerifiedLayout)
{
  auto read = pyenv_runtime_start("3.13");
  if (!read)
    GTEST_SKIP() << "pyenv built no CPython 3.13 here";
  const auto& [file, start] = *read;
  EXPECT_EQ(start.size(), debug_offsets_bytes(13));
  EXPECT_TRUE(start.starts_with("xdebugpy"));
  auto layout = verified_layout(3, 13);
  ASSERT_TRUE(layout);
  auto agreed = check_debug_offsets(start, file, *layout);
  EXPECT_TRUE(agreed) << agreed.error().message;
  // Before 3.13 there is nothing to check, and nothing is read.
  EXPECT_EQ(debug_offsets_bytes(12), 0u);
  EXPECT_TRUE(check_debug_offsets("", CPythonFile{{}, 3, 12, 1, false}, *verified_layout(3, 12)));
}

TEST(CPythonDebugOffsets, ABuildLaidOutOtherwiseIsRefusedSayingWhere)
{
  auto read = pyenv_runtime_start("3.13");
  if (!read)
    GTEST_SKIP() << "pyenv built no CPython 3.13 here";
  const auto& [file, start] = *read;
  CPythonLayout layout = *verified_layout(3, 13);
  auto refusal = [&](const std::string& bytes) {
    auto checked = check_debug_offsets(bytes, file, layout);
    return checked ? std::string() : checked.error().message;
  };
  auto with_word = [&](size_t position, uint64_t word) {
    std::string bytes = start;
    std::memcpy(bytes.data() + position, &word, sizeof word);
    return bytes;
  };
  // Each field the walk or the reader goes by, moved by 8 bytes.
  for (const auto& field : debug_offset_fields(13)) {
    std::string message = refusal(with_word(field.position, layout.*field.field + 8));
    EXPECT_NE(message.find(std::string(field.said_as) + " at "), std::string::npos)
        << field.name << ": " << message;
  }
  EXPECT_NE(refusal(with_word(16, 1)).find("free-threaded"), std::string::npos);
  EXPECT_NE(refusal(with_word(8, 0x030c01f0)).find("another version"), std::string::npos);
  std::string no_cookie = start;
  no_cookie[0] = 'y';
  EXPECT_NE(refusal(no_cookie).find("no _Py_DebugOffsets"), std::string::npos);
  EXPECT_NE(refusal(start.substr(0, start.size() - 1)).find("no _Py_DebugOffsets"),
            std::string::npos);
  EXPECT_EQ(refusal(start), "");
}

} // namespace
} // namespace flamebpf::cpython
