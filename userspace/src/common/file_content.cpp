#include "common/file_content.h"

#include <cerrno>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

#include "common/unique_fd.h"

namespace flamebpf {

FileContent::FileContent(std::string text) : text_(std::move(text)) {}

FileContent::FileContent(FileContent&& other) noexcept
    : text_(std::move(other.text_)), mapped_(std::exchange(other.mapped_, nullptr)),
      size_(std::exchange(other.size_, 0))
{
}

FileContent& FileContent::operator=(FileContent&& other) noexcept
{
  if (this != &other) {
    release();
    text_ = std::move(other.text_);
    mapped_ = std::exchange(other.mapped_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

FileContent::~FileContent()
{
  release();
}

void FileContent::release()
{
  if (mapped_)
    ::munmap(const_cast<char*>(mapped_), size_);
  mapped_ = nullptr;
}

Result<FileContent> FileContent::read(const std::string& path)
{
  UniqueFd fd(path == "-" ? ::dup(STDIN_FILENO)
                          : ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd.valid())
    return fail(system_error(errno, "cannot open " + path));
  struct stat status {};
  if (::fstat(fd.get(), &status) == 0 && S_ISREG(status.st_mode) && status.st_size > 0) {
    auto size = static_cast<size_t>(status.st_size);
    void* mapped = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd.get(), 0);
    if (mapped != MAP_FAILED) {
      FileContent content;
      content.mapped_ = static_cast<const char*>(mapped);
      content.size_ = size;
      return content;
    }
  }
  FileContent content;
  constexpr size_t kChunk = 1 << 20;
  for (;;) {
    size_t used = content.text_.size();
    content.text_.resize(used + kChunk);
    ssize_t n = ::read(fd.get(), content.text_.data() + used, kChunk);
    content.text_.resize(used + static_cast<size_t>(std::max<ssize_t>(n, 0)));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return fail(system_error(errno, "cannot read " + path));
    if (n == 0)
      break;
  }
  return content;
}

} // namespace flamebpf
