// The bytes of HotSpot's dynamic attach protocol: what flamebpf sends a JVM and how it reads the
// reply. Pure functions over bytes; the connection and the sequence that starts the JVM's attach
// listener are in attach_connection.h and hotspot_attach.h.
//
// One connection carries one request and one reply, then the JVM closes it:
//   request: "1\0" <command> "\0" <arg0> "\0" <arg1> "\0" <arg2> "\0"
//            (protocol version 1, which JDK 8 to JDK 25 all accept; always exactly three
//            arguments, empty ones as "")
//   reply:   <status> "\n" <body>, up to end of stream; status is a decimal jint: 0 (JNI_OK), -1
//            (JNI_ERR) or 101 (protocol mismatch).
// JDK 24 added a version 2 with any number of arguments and JDK 25 options such as "streaming";
// both are opt-in, and version 1 stays accepted, so this client speaks version 1 only.
//
// A reply comes from whatever process holds the socket: any bytes. Errors quote at most its first
// line, with anything but printable ASCII replaced.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace flamebpf::hotspot {

// Limits of protocol version 1: HotSpot drops a request that exceeds them without a reply.
inline constexpr size_t kMaxCommandBytes = 16;
inline constexpr size_t kMaxArgumentBytes = 1024;
inline constexpr size_t kArgumentCount = 3;
// The most reply bytes read before giving up. flamebpf sends only load and jcmd VM.flags, whose
// replies are a few KiB; a JVM that sends more is not trusted with more memory.
inline constexpr size_t kMaxReplyBytes = 1 << 20;
// The status a JVM sends when it does not speak the request's protocol version.
inline constexpr int kStatusBadVersion = 101;

// The bytes of a version 1 request. Fails (nothing is sent) on an empty or too long command, more
// than three arguments, a too long argument or an embedded NUL.
[[nodiscard]] Result<std::string> encode_request(std::string_view command,
                                                 const std::vector<std::string>& args);

// A reply split into its status line and body.
struct Reply {
  int status = 0;   // 0 on success
  std::string body; // everything after the status line, possibly empty
};

// Splits everything read from the socket into status and body. An empty reply (the JVM closed the
// connection: it refused our credentials or the request), a missing newline (truncated) and a
// status line that is not a decimal int are errors.
[[nodiscard]] Result<Reply> parse_reply(std::string_view raw);

// The body of a reply whose status is 0; otherwise an error naming the command, the status and
// the first line of the body.
[[nodiscard]] Result<std::string> check_reply(const Reply& reply, std::string_view command);

// Interprets the reply to "load". When Agent_OnAttach ran, the body's first line is its result N,
// as "return code: N" (since JDK-8252657, JDK 16; JDK 17 and 25 checked) or as the bare number
// (JDK 8); a non-zero N is an error. Otherwise the library did not load and the body says why:
// "<path> was not loaded." then dlerror()'s text, "Agent_OnAttach is not available in <path>",
// or "Dynamic agent loading is not enabled..." (-XX:-EnableDynamicAgentLoading). The status is
// -1 in those cases up to JDK 20 and 0 from JDK 21 on (JDK 25 checked), so it is not relied on.
[[nodiscard]] Result<> check_load_reply(const Reply& reply);

} // namespace flamebpf::hotspot
