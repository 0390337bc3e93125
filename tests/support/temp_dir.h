// Scratch directories for the unit and integration tests.
#pragma once

#include <filesystem>

namespace flamebpf::testing {

// A fresh directory, removed with its content on destruction.
class TempDir {
public:
  // A new directory named flamebpf-test.XXXXXX below parent (the system's temporary directory
  // unless given), with the given permissions. Throws std::system_error if it cannot be made.
  explicit TempDir(const std::filesystem::path& parent = std::filesystem::temp_directory_path(),
                   std::filesystem::perms mode = std::filesystem::perms::owner_all);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

private:
  std::filesystem::path path_;
};

} // namespace flamebpf::testing
