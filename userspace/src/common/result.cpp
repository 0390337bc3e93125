#include "common/result.h"

#include <cstring>

namespace flamebpf {

Error system_error(int errno_value, const std::string& what)
{
  return Error{errno_value, what + ": " + std::strerror(errno_value)};
}

} // namespace flamebpf
