#include <gtest/gtest.h>
#include <random>
#include <string>

#include "jvm/attach_protocol.h"
#include "test_support.h"

namespace flamebpf::jvm {
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

TEST(AttachReply, RandomBytesNeverCrashTheParsers)
{
  std::mt19937 random(42);
  for (int round = 0; round < 5000; ++round) {
    std::string bytes(random() % 64, '\0');
    for (char& c : bytes)
      c = static_cast<char>(random() % 4 == 0 ? "0-1\n:\t "[random() % 7] : random() % 256);
    auto reply = parse_reply(bytes);
    if (!reply) {
      expect_printable(reply.error().message);
      continue;
    }
    if (auto body = check_reply(*reply, "x"); !body)
      expect_printable(body.error().message);
    if (auto loaded = check_load_reply(*reply); !loaded)
      expect_printable(loaded.error().message);
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
} // namespace flamebpf::jvm
