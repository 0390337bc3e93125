#include "serve/content_policies.h"

#include <nettle/base64.h>
#include <nettle/sha2.h>

#include "emit/svg.h"

namespace flamebpf::serve {
namespace {

// 'sha256-…' of text, as a policy names an inline script it allows.
std::string script_hash(const std::string& text)
{
  sha256_ctx context;
  sha256_init(&context);
  sha256_update(&context, text.size(), reinterpret_cast<const uint8_t*>(text.data()));
  uint8_t digest[SHA256_DIGEST_SIZE];
  sha256_digest(&context, sizeof digest, digest);
  std::string encoded(BASE64_ENCODE_RAW_LENGTH(sizeof digest), '\0');
  base64_encode_raw(encoded.data(), sizeof digest, digest);
  return "'sha256-" + encoded + "'";
}

} // namespace

const std::string& flame_graph_policy()
{
  static const std::string policy = "default-src 'none'; script-src " +
                                    script_hash(emit::svg_script_text()) +
                                    "; style-src 'unsafe-inline'; frame-ancestors 'self'";
  return policy;
}

} // namespace flamebpf::serve
