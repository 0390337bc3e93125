#include "common/log.h"

#include <bpf/libbpf.h>
#include <cstdarg>
#include <cstdio>
#include <spdlog/sinks/stdout_sinks.h>
#include <string>

namespace flamebpf::log {
namespace {

bool g_verbose = false;

int libbpf_print(libbpf_print_level level, const char* format, va_list args)
{
  // libbpf's own diagnostics (each starting "libbpf: ") are for developers; users get our
  // one-line errors instead.
  if (!g_verbose)
    return 0;
  // Sized from a first pass: a verifier log arrives as one message of many kilobytes.
  va_list measure;
  va_copy(measure, args);
  int length = std::vsnprintf(nullptr, 0, format, measure);
  va_end(measure);
  if (length <= 0)
    return 0;
  std::string line(static_cast<size_t>(length) + 1, '\0');
  std::vsnprintf(line.data(), line.size(), format, args);
  line.resize(static_cast<size_t>(length));
  while (!line.empty() && line.back() == '\n')
    line.pop_back();
  if (level == LIBBPF_WARN)
    spdlog::warn("{}", line);
  else
    spdlog::debug("{}", line);
  return 0;
}

} // namespace

void init(bool verbose)
{
  g_verbose = verbose;
  auto logger = spdlog::stderr_logger_st("flamebpf");
  logger->set_pattern("flamebpf: %^%l%$: %v");
  logger->set_level(verbose ? spdlog::level::debug : spdlog::level::info);
  spdlog::set_default_logger(logger);
  libbpf_set_print(libbpf_print);
}

bool verbose()
{
  return g_verbose;
}

} // namespace flamebpf::log
