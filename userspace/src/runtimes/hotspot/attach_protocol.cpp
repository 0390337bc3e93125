#include "runtimes/hotspot/attach_protocol.h"

#include <algorithm>

#include "common/text.h"

namespace flamebpf::hotspot {
namespace {

constexpr std::string_view kReturnCodePrefix = "return code: ";

// The first line of text, with control characters replaced, short enough for a one-line error.
std::string first_line(std::string_view text)
{
  constexpr size_t kMax = 200;
  std::string line;
  for (char c : text.substr(0, text.find('\n'))) {
    if (line.size() == kMax) {
      line += "...";
      break;
    }
    // The reply comes from a process in a container: only printable ASCII reaches the log.
    auto byte = static_cast<unsigned char>(c);
    line += (byte < 0x20 || byte >= 0x7f) ? '?' : c;
  }
  return line;
}

} // namespace

Result<std::string> encode_request(std::string_view command, const std::vector<std::string>& args)
{
  if (command.empty() || command.size() > kMaxCommandBytes ||
      command.find('\0') != std::string_view::npos)
    return fail(error("invalid attach command '" + first_line(command) + "': needs 1 to " +
                      std::to_string(kMaxCommandBytes) + " bytes and no NUL"));
  if (args.size() > kArgumentCount)
    return fail(error("attach command " + std::string(command) + " has " +
                      std::to_string(args.size()) + " arguments; the protocol carries at most " +
                      std::to_string(kArgumentCount)));
  std::string request = "1";
  request += '\0';
  request += command;
  request += '\0';
  for (size_t i = 0; i < kArgumentCount; ++i) {
    std::string_view arg = i < args.size() ? std::string_view(args[i]) : std::string_view();
    if (arg.size() > kMaxArgumentBytes || arg.find('\0') != std::string_view::npos)
      return fail(error("argument " + std::to_string(i) + " of attach command " +
                        std::string(command) + " is invalid: needs at most " +
                        std::to_string(kMaxArgumentBytes) + " bytes and no NUL"));
    request += arg;
    request += '\0';
  }
  return request;
}

Result<Reply> parse_reply(std::string_view raw)
{
  if (raw.empty())
    return fail(error("the JVM closed the connection without a reply (it refused the client's "
                      "credentials or the request)"));
  size_t newline = raw.find('\n');
  if (newline == std::string_view::npos)
    return fail(error("truncated reply '" + first_line(raw) + "': no complete status line"));
  auto status = text::parse_number<int>(raw.substr(0, newline));
  if (!status)
    return fail(error("malformed reply: status line '" + first_line(raw) + "' is not a number"));
  return Reply{*status, std::string(raw.substr(newline + 1))};
}

Result<std::string> check_reply(const Reply& reply, std::string_view command)
{
  if (reply.status == 0)
    return reply.body;
  if (reply.status == kStatusBadVersion)
    return fail(error("the JVM refused attach command " + std::string(command) +
                      ": protocol version mismatch"));
  std::string detail = first_line(reply.body);
  return fail(error("attach command " + std::string(command) + " failed (status " +
                    std::to_string(reply.status) + ")" + (detail.empty() ? "" : ": " + detail)));
}

Result<> check_load_reply(const Reply& reply)
{
  std::string_view body = reply.body;
  std::string_view line = body.substr(0, body.find('\n'));
  bool prefixed = line.starts_with(kReturnCodePrefix);
  if (prefixed || text::parse_number<int>(line)) {
    std::string_view number = prefixed ? line.substr(kReturnCodePrefix.size()) : line;
    while (!number.empty() && (number.back() == '\r' || number.back() == ' '))
      number.remove_suffix(1);
    auto code = text::parse_number<int>(number);
    if (!code)
      return fail(error("malformed reply to load: '" + first_line(line) + "'"));
    if (*code != 0)
      return fail(
          error("the agent's Agent_OnAttach failed with return code " + std::to_string(*code)));
    if (reply.status != 0)
      return fail(error("the JVM reported status " + std::to_string(reply.status)));
    return {};
  }
  if (body.empty())
    return fail(error("the JVM could not load it (status " + std::to_string(reply.status) +
                      ") and gave no reason"));
  // "<library> was not loaded." then dlerror()'s text on the next line: both say why.
  std::string why = first_line(body);
  std::string_view rest = body.substr(std::min(body.size(), line.size() + 1));
  if (!rest.empty() && !first_line(rest).empty())
    why += " " + first_line(rest);
  return fail(error("the JVM could not load it: " + why));
}

} // namespace flamebpf::hotspot
