#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <gtest/gtest.h>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "runtimes/hotspot/attach_protocol.h"
#include "test_support.h"

namespace flamebpf::hotspot {
namespace {

using namespace std::string_literals;
using flamebpf::testing::read_data;

std::string fixture(const std::string& name)
{
  return read_data("attach/" + name);
}

bool contains(const std::string& text, const std::string& part)
{
  return text.find(part) != std::string::npos;
}

// A reply's bytes reach the log only as printable ASCII.
void expect_printable(const std::string& message)
{
  for (char c : message) {
    EXPECT_GE(static_cast<unsigned char>(c), 0x20) << "control character in: " << message;
    EXPECT_LT(static_cast<unsigned char>(c), 0x7f) << "non-ASCII byte in: " << message;
  }
}

// --- Request encoding -------------------------------------------------------------------------

TEST(AttachRequest, VersionCommandAndExactlyThreeNulTerminatedArguments)
{
  auto request = encode_request("jcmd", {"VM.flags"});
  ASSERT_TRUE(request.has_value()) << request.error().message;
  EXPECT_EQ(*request, "1\0jcmd\0VM.flags\0\0\0"s);

  auto load = encode_request("load", {"/tmp/libagent.so", "true", "a=b"});
  ASSERT_TRUE(load.has_value());
  EXPECT_EQ(*load, "1\0load\0/tmp/libagent.so\0true\0a=b\0"s);

  auto bare = encode_request("properties", {});
  ASSERT_TRUE(bare.has_value());
  EXPECT_EQ(*bare, "1\0properties\0\0\0\0"s);
}

TEST(AttachRequest, LimitsOfVersionOne)
{
  EXPECT_TRUE(encode_request(std::string(16, 'c'), {}).has_value());
  EXPECT_TRUE(encode_request("jcmd", {std::string(1024, 'a')}).has_value());

  EXPECT_FALSE(encode_request("", {}).has_value());
  EXPECT_FALSE(encode_request(std::string(17, 'c'), {}).has_value());
  EXPECT_FALSE(encode_request("jcmd", {std::string(1025, 'a')}).has_value());
  EXPECT_FALSE(encode_request("jcmd", {"a", "b", "c", "d"}).has_value());
  EXPECT_FALSE(encode_request("jc\0md"s, {}).has_value());
  auto nul = encode_request("jcmd", {"VM.flags\0-all"s});
  ASSERT_FALSE(nul.has_value());
  EXPECT_TRUE(contains(nul.error().message, "argument 0")) << nul.error().message;
}

// --- Reply parsing ----------------------------------------------------------------------------

TEST(AttachReply, SplitsStatusAndBody)
{
  auto reply = parse_reply(fixture("jdk17_vm_version.reply"));
  ASSERT_TRUE(reply.has_value()) << reply.error().message;
  EXPECT_EQ(reply->status, 0);
  EXPECT_EQ(reply->body,
            "OpenJDK 64-Bit Server VM version 17.0.15+6-Debian-1deb12u1\nJDK 17.0.15\n");
  EXPECT_EQ(check_reply(*reply, "jcmd").value_or(""), reply->body);

  auto empty_body = parse_reply("0\n");
  ASSERT_TRUE(empty_body.has_value());
  EXPECT_EQ(empty_body->body, "");

  auto version = parse_reply(fixture("jdk25_getversion.reply"));
  ASSERT_TRUE(version.has_value());
  EXPECT_EQ(version->body, "2");
}

TEST(AttachReply, ErrorStatusBecomesAnErrorWithTheJvmsMessage)
{
  for (const char* name : {"jdk17_unknown_command.reply", "jdk25_unknown_command.reply"}) {
    auto reply = parse_reply(fixture(name));
    ASSERT_TRUE(reply.has_value()) << name;
    EXPECT_EQ(reply->status, -1);
    auto body = check_reply(*reply, "jcmd");
    ASSERT_FALSE(body.has_value());
    EXPECT_EQ(body.error().message, "attach command jcmd failed (status -1): "
                                    "java.lang.IllegalArgumentException: Unknown diagnostic "
                                    "command");
  }
  auto old_jvm = check_reply(parse_reply(fixture("jdk17_getversion.reply")).value(), "getversion");
  ASSERT_FALSE(old_jvm.has_value());
  EXPECT_TRUE(contains(old_jvm.error().message, "Operation getversion not recognized!"));

  auto mismatch = check_reply(parse_reply("101\n").value(), "jcmd");
  ASSERT_FALSE(mismatch.has_value());
  EXPECT_TRUE(contains(mismatch.error().message, "protocol version mismatch"));
}

TEST(AttachReply, TruncatedAndGarbageRepliesAreCleanErrors)
{
  auto closed = parse_reply("");
  ASSERT_FALSE(closed.has_value());
  EXPECT_TRUE(contains(closed.error().message, "without a reply"));

  for (const char* truncated : {"0", "-1", "12345"}) {
    auto reply = parse_reply(truncated);
    ASSERT_FALSE(reply.has_value()) << truncated;
    EXPECT_TRUE(contains(reply.error().message, "truncated")) << reply.error().message;
  }
  for (std::string garbage :
       {std::string("\n"), std::string("HTTP/1.1 400 Bad Request\n"), std::string("+0\nbody"),
        std::string(" 0\n"), std::string("0 \n"), std::string("99999999999\n"), "\x01\x02\n"s,
        "\xde\xad\xbe\xef\x7f\n"s}) {
    auto reply = parse_reply(garbage);
    ASSERT_FALSE(reply.has_value()) << garbage;
    EXPECT_TRUE(contains(reply.error().message, "malformed")) << reply.error().message;
    expect_printable(reply.error().message);
  }
}

// The bytes of text with everything but printable ASCII escaped, to show an input in a failure.
std::string escaped(std::string_view text)
{
  static constexpr char kHex[] = "0123456789abcdef";
  std::string shown;
  for (char c : text) {
    auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f && c != '\\') {
      shown += c;
    } else {
      shown += "\\x";
      shown += kHex[byte >> 4];
      shown += kHex[byte & 0xf];
    }
  }
  return shown;
}

// text as the decimal int a reply's status line must be (an optional '-', then digits, within
// int's range), or nullopt: the documented grammar, checked independently of the parser.
std::optional<int> decimal_int(std::string_view text)
{
  std::string_view digits = text.starts_with('-') ? text.substr(1) : text;
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos)
    return std::nullopt;
  std::string copy(text);
  errno = 0;
  long long value = std::strtoll(copy.c_str(), nullptr, 10);
  if (errno == ERANGE || value < std::numeric_limits<int>::min() ||
      value > std::numeric_limits<int>::max())
    return std::nullopt;
  return static_cast<int>(value);
}

// Pieces that random replies are made of: near misses of status lines and of load results, and
// single random bytes.
std::string reply_piece(std::mt19937& random)
{
  static const std::vector<std::string> kPieces{"0",
                                                "-1",
                                                "7",
                                                "101",
                                                "-",
                                                "+",
                                                "00",
                                                " ",
                                                "\t",
                                                "\r",
                                                "x",
                                                "\n",
                                                "-0",
                                                "2147483647",
                                                "2147483648",
                                                "-2147483648",
                                                "-2147483649",
                                                "99999999999999999999",
                                                "\x7f",
                                                "return code: ",
                                                "return code:",
                                                "return code: 0",
                                                "return code: 0\r",
                                                " was not loaded."};
  if (random() % 3 == 0)
    return std::string(1, static_cast<char>(random() % 256));
  return kPieces[random() % kPieces.size()];
}

// Whatever the bytes, a reply parses wholly or fails with a one-line printable error: on success
// the status is the first line's decimal int and the body is every byte after it, and the checks
// on a parsed reply succeed exactly when its status (and for load, its return code) is 0.
TEST(AttachReply, AnyBytesParseWhollyOrFailCleanly)
{
  std::mt19937 random(42);
  for (int round = 0; round < 20000 && !HasFailure(); ++round) {
    std::string raw;
    if (round % 4 == 0) {
      raw.resize(random() % 64);
      for (char& c : raw)
        c = static_cast<char>(random() % 256);
    } else {
      for (size_t pieces = random() % 3; pieces > 0; --pieces)
        raw += reply_piece(random);
      if (random() % 8 != 0)
        raw += '\n';
      for (size_t pieces = random() % 6; pieces > 0; --pieces)
        raw += reply_piece(random);
    }
    SCOPED_TRACE("reply '" + escaped(raw) + "'");

    auto reply = parse_reply(raw);
    size_t newline = raw.find('\n');
    std::optional<int> status =
        newline == std::string::npos ? std::nullopt : decimal_int(raw.substr(0, newline));
    if (!status) {
      ASSERT_FALSE(reply.has_value()) << "status " << reply->status;
      expect_printable(reply.error().message);
      const char* why = raw.empty()                    ? "without a reply"
                        : newline == std::string::npos ? "truncated"
                                                       : "malformed";
      EXPECT_TRUE(contains(reply.error().message, why)) << reply.error().message;
      continue;
    }
    ASSERT_TRUE(reply.has_value()) << reply.error().message;
    EXPECT_EQ(reply->status, *status);
    EXPECT_EQ(reply->body, raw.substr(newline + 1));

    auto body = check_reply(*reply, "jcmd");
    if (*status == 0) {
      EXPECT_EQ(body.value_or("<error>"), reply->body);
    } else {
      ASSERT_FALSE(body.has_value());
      expect_printable(body.error().message);
      EXPECT_TRUE(
          contains(body.error().message, *status == kStatusBadVersion
                                             ? "protocol version mismatch"
                                             : "failed (status " + std::to_string(*status) + ")"))
          << body.error().message;
    }

    // The first line of the body is the agent's return code, alone or after "return code: ".
    std::string_view line = std::string_view(reply->body).substr(0, reply->body.find('\n'));
    std::optional<int> code;
    if (line.starts_with("return code: ")) {
      std::string_view number = line.substr(std::string_view("return code: ").size());
      while (!number.empty() && (number.back() == '\r' || number.back() == ' '))
        number.remove_suffix(1);
      code = decimal_int(number);
    } else {
      code = decimal_int(line);
    }
    auto loaded = check_load_reply(*reply);
    EXPECT_EQ(loaded.has_value(), *status == 0 && code == 0);
    if (!loaded.has_value()) {
      expect_printable(loaded.error().message);
      if (code.value_or(0) != 0) {
        EXPECT_TRUE(contains(loaded.error().message, "return code " + std::to_string(*code)))
            << loaded.error().message;
      }
    }
  }
}

TEST(AttachReply, LoadSucceedsOnlyWithReturnCodeZero)
{
  for (const char* name : {"jdk17_load_ok.reply", "jdk25_load_ok.reply"}) {
    auto loaded = check_load_reply(parse_reply(fixture(name)).value());
    EXPECT_TRUE(loaded.has_value()) << name << ": " << loaded.error().message;
  }
  // JDK 8 sends the bare number.
  EXPECT_TRUE(check_load_reply(parse_reply("0\n0\n").value()).has_value());
  EXPECT_EQ(check_load_reply(parse_reply("0\n-1\n").value()).error().message,
            "the agent's Agent_OnAttach failed with return code -1");
  for (const char* name : {"jdk17_load_agent_failed.reply", "jdk25_load_agent_failed.reply"}) {
    auto loaded = check_load_reply(parse_reply(fixture(name)).value());
    ASSERT_FALSE(loaded.has_value()) << name;
    EXPECT_EQ(loaded.error().message, "the agent's Agent_OnAttach failed with return code 7");
  }
}

TEST(AttachReply, LoadFailuresCarryTheJvmsReason)
{
  for (const char* name : {"jdk17_load_not_loaded.reply", "jdk25_load_not_loaded.reply"}) {
    auto loaded = check_load_reply(parse_reply(fixture(name)).value());
    ASSERT_FALSE(loaded.has_value()) << name;
    EXPECT_EQ(loaded.error().message,
              "the JVM could not load it: /var/tmp/fb-probe/missing.so was not loaded. "
              "/var/tmp/fb-probe/missing.so: cannot open shared object file: No such file or "
              "directory");
  }
  for (const char* name : {"jdk17_load_no_onattach.reply", "jdk25_load_no_onattach.reply"}) {
    auto loaded = check_load_reply(parse_reply(fixture(name)).value());
    ASSERT_FALSE(loaded.has_value()) << name;
    EXPECT_TRUE(contains(loaded.error().message, "Agent_OnAttach is not available in"));
  }
  EXPECT_FALSE(check_load_reply(parse_reply("0\n").value()).has_value());
  auto disabled = check_load_reply(
      parse_reply("0\nDynamic agent loading is not enabled. Use -XX:+EnableDynamicAgentLoading "
                  "to launch target VM.\n")
          .value());
  ASSERT_FALSE(disabled.has_value());
  EXPECT_TRUE(contains(disabled.error().message, "Dynamic agent loading is not enabled"));
  EXPECT_FALSE(check_load_reply(parse_reply("0\nreturn code: x\n").value()).has_value());
  EXPECT_FALSE(check_load_reply(parse_reply("0\nreturn code: \n").value()).has_value());
  EXPECT_FALSE(check_load_reply(parse_reply("-1\nreturn code: 0\n").value()).has_value());
  EXPECT_FALSE(check_load_reply(parse_reply("0\nreturn code: -1\n").value()).has_value());
}

} // namespace
} // namespace flamebpf::hotspot
