// Replies of a process that claims to be a JVM, read from its attach socket: any bytes. Parsing
// and interpreting them must never crash, and an error message must carry no control character.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "runtimes/hotspot/attach_protocol.h"

namespace {

void check_message(const std::string& message)
{
  for (char c : message) {
    auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte >= 0x7f)
      std::abort();
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  std::string_view raw(reinterpret_cast<const char*>(data), size);
  auto reply = flamebpf::hotspot::parse_reply(raw);
  if (!reply) {
    check_message(reply.error().message);
    return 0;
  }
  if (auto body = flamebpf::hotspot::check_reply(*reply, "jcmd"); !body)
    check_message(body.error().message);
  if (auto loaded = flamebpf::hotspot::check_load_reply(*reply); !loaded)
    check_message(loaded.error().message);
  return 0;
}
