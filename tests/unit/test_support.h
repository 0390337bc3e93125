// Helpers shared by the unit tests: fixture files from tests/data and scratch directories.
#pragma once

#include <filesystem>
#include <string>

namespace flamebpf::testing {

// The path of a fixture below tests/data, e.g. data_path("kallsyms/sample.txt").
std::string data_path(const std::string& relative);

// The whole content of a fixture below tests/data; fails the calling test if it cannot be read.
std::string read_data(const std::string& relative);

// Writes content to path, creating parent directories.
void write_file(const std::filesystem::path& path, const std::string& content);

// A fresh directory under the system temporary directory, removed with its content on
// destruction.
class TempDir {
public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

private:
  std::filesystem::path path_;
};

} // namespace flamebpf::testing
