#include "pipeline/output_paths.h"

#include <ctime>

namespace flamebpf::pipeline {

std::string default_output_path()
{
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
  return std::string("./flamebpf-") + stamp + ".folded";
}

std::string output_path_for_target(const std::string& path, const std::string& file_name)
{
  size_t slash = path.rfind('/');
  size_t base = slash == std::string::npos ? 0 : slash + 1;
  size_t dot = path.rfind('.');
  // A leading dot (".profile") or none at all: no extension to keep.
  if (dot == std::string::npos || dot <= base)
    return path + "." + file_name;
  return path.substr(0, dot) + "." + file_name + path.substr(dot);
}

} // namespace flamebpf::pipeline
