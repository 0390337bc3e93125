// The whole content of a file, read once: mapped for a regular file (no copy, however large),
// read into memory for a pipe or stdin.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

namespace flamebpf {

class FileContent {
public:
  // The file at path ("-" for stdin).
  [[nodiscard]] static Result<FileContent> read(const std::string& path);
  // Text already in memory.
  explicit FileContent(std::string text);

  FileContent(FileContent&& other) noexcept;
  FileContent& operator=(FileContent&& other) noexcept;
  FileContent(const FileContent&) = delete;
  FileContent& operator=(const FileContent&) = delete;
  ~FileContent();

  std::string_view view() const { return mapped_ ? std::string_view(mapped_, size_) : text_; }

private:
  FileContent() = default;
  void release();

  std::string text_;
  const char* mapped_ = nullptr;
  size_t size_ = 0;
};

} // namespace flamebpf
