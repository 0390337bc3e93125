// Move-only owner of a file descriptor.
#pragma once

#include <unistd.h>
#include <utility>

namespace flamebpf {

class UniqueFd {
public:
  UniqueFd() = default;
  // Takes ownership of fd (which may be -1).
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept
  {
    if (this != &other)
      reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  // The descriptor, still owned.
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Gives up ownership.
  int release() { return std::exchange(fd_, -1); }
  // Closes the current descriptor and owns fd instead.
  void reset(int fd = -1)
  {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = fd;
  }

private:
  int fd_ = -1;
};

} // namespace flamebpf
