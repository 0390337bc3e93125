// Helpers shared by the unit tests: fixture files from tests/data and scratch directories.
#pragma once

#include <filesystem>
#include <string>

#include "common/elf_reader.h"
#include "common/result.h"
#include "common/unique_fd.h"
#include "temp_dir.h"

namespace flamebpf::testing {

// The path of a fixture below tests/data, e.g. data_path("kallsyms/sample.txt").
std::string data_path(const std::string& relative);

// The whole content of a fixture below tests/data; fails the calling test if it cannot be read.
std::string read_data(const std::string& relative);

// Writes content to path, creating parent directories.
void write_file(const std::filesystem::path& path, const std::string& content);

// A UNIX socket listening at path with mode 0600, as HotSpot's attach listener leaves it.
int listen_at(const std::string& path);

// Reads one attach request (five NUL-terminated strings) from a connection.
std::string read_request(int connection);

// An ELF file opened for flamebpf's own reader, with the descriptor the reader reads through.
struct OpenedElf {
  UniqueFd fd;
  ElfReader reader;
};
// The file at path opened as flamebpf reads a target's (its headers read); fails if it cannot be
// opened or is no ELF file.
Result<OpenedElf> open_elf(const std::string& path);

} // namespace flamebpf::testing
