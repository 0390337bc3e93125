// Result type used across flamebpf: a value or an Error, never an exception.
#pragma once

#include <expected>
#include <string>
#include <utility>

namespace flamebpf {

// What failed, on what, and why, as one line; errno_value is 0 when no system call is involved.
struct Error {
  int errno_value = 0;
  std::string message;
  bool usage =
      false; // the user asked for something impossible (exit code 2), not a runtime failure
};

template <class T = void> using Result = std::expected<T, Error>;

// An Error whose message is `what` followed by ": " and strerror(errno_value).
[[nodiscard]] Error system_error(int errno_value, const std::string& what);

// An Error with a message only.
[[nodiscard]] inline Error error(std::string message)
{
  return Error{0, std::move(message)};
}

// An Error caused by the command line: a bad option value or an unknown target.
[[nodiscard]] inline Error usage_error(std::string message)
{
  return Error{0, std::move(message), true};
}

// Shorthand for returning an error from a function returning Result<T>.
[[nodiscard]] inline std::unexpected<Error> fail(Error e)
{
  return std::unexpected<Error>(std::move(e));
}

} // namespace flamebpf
