#include "common/log.h"

#include <bpf/libbpf.h>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <fmt/format.h>
#include <mutex>
#include <spdlog/sinks/base_sink.h>
#include <string>
#include <unistd.h>

#include "common/utf8.h"

namespace flamebpf::log {
namespace {

bool g_verbose = false;

// Code points that act on a terminal or reorder what it shows: C1 controls, and the bidirectional
// embeddings, overrides and isolates that can make a name read as something else.
bool acts_on_terminal(char32_t code)
{
  return (code >= 0x80 && code <= 0x9f) || (code >= 0x202a && code <= 0x202e) ||
         (code >= 0x2066 && code <= 0x2069);
}

void append_escaped(std::string& out, std::string_view bytes)
{
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned char byte : bytes) {
    out += "\\x";
    out += kHex[byte >> 4];
    out += kHex[byte & 0xf];
  }
}

void write_line(std::string_view level, std::string_view message)
{
  std::string line = fmt::format("flamebpf: {}: {}\n", level, message);
  std::string_view rest = line;
  // One write per line when it fits the pipe: lines of two threads never interleave.
  while (!rest.empty()) {
    ssize_t n = ::write(STDERR_FILENO, rest.data(), rest.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return;
    rest.remove_prefix(static_cast<size_t>(n));
  }
}

std::string suppressed_line(uint64_t count)
{
  return fmt::format("{} more warnings were not shown (at most {} are shown a minute; run with -v "
                     "to see all)",
                     count, WarningBudget::kWarningsPerWindow);
}

// Stderr, with every message made printable and warnings held to their budget.
class SafeStderrSink final : public spdlog::sinks::base_sink<std::mutex> {
public:
  void flush_suppressed()
  {
    std::lock_guard lock(mutex_);
    if (uint64_t held = budget_.suppressed(); held > 0) {
      write_line("warning", suppressed_line(held));
      budget_ = WarningBudget{};
    }
  }

protected:
  void sink_it_(const spdlog::details::log_msg& message) override
  {
    if (!g_verbose) {
      // Any line closes a window that is over, so its count comes within an interval.
      auto now = WarningBudget::Clock::now();
      if (uint64_t held = budget_.roll(now); held > 0)
        write_line("warning", suppressed_line(held));
      if (message.level == spdlog::level::warn && !budget_.admit(now))
        return;
    }
    auto level = spdlog::level::to_string_view(message.level);
    write_line(std::string_view(level.data(), level.size()),
               printable(std::string_view(message.payload.data(), message.payload.size())));
  }
  void flush_() override {}

private:
  WarningBudget budget_;
};

std::shared_ptr<SafeStderrSink> g_sink;

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

std::string printable(std::string_view text)
{
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    char32_t code = 0;
    size_t length = utf8::sequence_at(text, 0, code);
    if (length == 0) {
      append_escaped(out, text.substr(0, 1));
      text.remove_prefix(1);
      continue;
    }
    std::string_view sequence = text.substr(0, length);
    if (code == '\\')
      out += "\\\\";
    else if (code < 0x20 || code == 0x7f || acts_on_terminal(code))
      append_escaped(out, sequence);
    else
      out += sequence;
    text.remove_prefix(length);
  }
  return out;
}

uint64_t WarningBudget::roll(Clock::time_point now)
{
  if (!started_ || now - window_start_ < kWindow)
    return 0;
  uint64_t held = suppressed_;
  *this = WarningBudget{};
  return held;
}

bool WarningBudget::admit(Clock::time_point now)
{
  if (!started_) {
    started_ = true;
    window_start_ = now;
  }
  if (shown_ < kWarningsPerWindow) {
    ++shown_;
    return true;
  }
  ++suppressed_;
  return false;
}

void init(bool verbose)
{
  g_verbose = verbose;
  g_sink = std::make_shared<SafeStderrSink>();
  auto logger = std::make_shared<spdlog::logger>("flamebpf", g_sink);
  logger->set_level(verbose ? spdlog::level::debug : spdlog::level::info);
  spdlog::set_default_logger(logger);
  libbpf_set_print(libbpf_print);
}

bool verbose()
{
  return g_verbose;
}

void flush_suppressed()
{
  if (g_sink)
    g_sink->flush_suppressed();
}

} // namespace flamebpf::log
