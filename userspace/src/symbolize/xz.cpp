#include "symbolize/xz.h"

#include <algorithm>
#include <cerrno>
#include <lzma.h>
#include <optional>

namespace flamebpf::symbolize {
namespace {

// Frees the decoder however the function returns.
class Decoder {
public:
  ~Decoder() { lzma_end(&stream_); }
  lzma_stream* get() { return &stream_; }

private:
  lzma_stream stream_ = LZMA_STREAM_INIT;
};

std::string describe(lzma_ret code)
{
  switch (code) {
  case LZMA_MEMLIMIT_ERROR:
    return "its decoder needs more memory than allowed";
  case LZMA_FORMAT_ERROR:
    return "not xz data";
  case LZMA_OPTIONS_ERROR:
    return "unsupported xz options";
  case LZMA_DATA_ERROR:
  case LZMA_BUF_ERROR:
    return "corrupt or truncated xz data";
  case LZMA_MEM_ERROR:
    return "out of memory";
  default:
    return "xz error " + std::to_string(static_cast<int>(code));
  }
}

// The uncompressed size a single xz stream declares in its index (at its end), if it has one
// that parses. The decoder checks the data against the index, so the output cannot exceed it.
std::optional<uint64_t> declared_size(std::string_view input)
{
  if (input.size() < 2 * LZMA_STREAM_HEADER_SIZE)
    return std::nullopt;
  const auto* bytes = reinterpret_cast<const uint8_t*>(input.data());
  lzma_stream_flags footer{};
  if (lzma_stream_footer_decode(&footer, bytes + input.size() - LZMA_STREAM_HEADER_SIZE) !=
          LZMA_OK ||
      footer.backward_size > input.size() - 2 * LZMA_STREAM_HEADER_SIZE)
    return std::nullopt;
  lzma_index* index = nullptr;
  uint64_t index_memory = 1 << 20;
  size_t position = 0;
  size_t index_at = input.size() - LZMA_STREAM_HEADER_SIZE - footer.backward_size;
  if (lzma_index_buffer_decode(&index, &index_memory, nullptr, bytes + index_at, &position,
                               footer.backward_size) != LZMA_OK)
    return std::nullopt;
  uint64_t size = lzma_index_uncompressed_size(index);
  lzma_index_end(index, nullptr);
  return size;
}

// Decodes input into out (capacity bytes), or, if out is null, into a scratch buffer only to
// count the bytes. Returns the decoded size, or capacity + 1 as soon as the output would pass
// capacity.
Result<size_t> decode(std::string_view input, uint64_t max_memory, char* out, size_t capacity)
{
  Decoder decoder;
  lzma_stream* stream = decoder.get();
  if (lzma_ret started = lzma_stream_decoder(stream, max_memory, 0); started != LZMA_OK)
    return fail(error("cannot decompress: " + describe(started)));
  stream->next_in = reinterpret_cast<const uint8_t*>(input.data());
  stream->avail_in = input.size();
  char scratch[64 << 10];
  for (;;) {
    if (stream->avail_out == 0) {
      auto done = static_cast<size_t>(stream->total_out);
      if (done > capacity)
        return capacity + 1;
      // One byte past capacity tells output that exactly fits from output that does not.
      if (out) {
        stream->next_out = reinterpret_cast<uint8_t*>(out + done);
        stream->avail_out = capacity + 1 - done;
      } else {
        stream->next_out = reinterpret_cast<uint8_t*>(scratch);
        stream->avail_out = sizeof scratch;
      }
    }
    lzma_ret code = lzma_code(stream, LZMA_FINISH);
    if (code == LZMA_STREAM_END)
      break;
    if (code != LZMA_OK)
      return fail(error("cannot decompress: " + describe(code)));
  }
  auto total = static_cast<size_t>(stream->total_out);
  return std::min(total, capacity + 1);
}

} // namespace

Result<std::string> xz_decompress(std::string_view input, size_t max_output, uint64_t max_memory)
{
  auto too_large = [&] {
    return fail(
        Error{EFBIG, "cannot decompress: more than " + std::to_string(max_output) + " bytes"});
  };
  // The size is known before the output is held: from the stream's index, else from decoding it
  // once without keeping anything. A bomb is refused holding nothing, and the output is allocated
  // once, at its size.
  std::optional<uint64_t> size = declared_size(input);
  if (!size) {
    auto counted = decode(input, max_memory, nullptr, max_output);
    if (!counted)
      return fail(counted.error());
    size = *counted;
  }
  if (*size > max_output)
    return too_large();
  // The output buffer has one spare byte: a stream longer than it said fills it.
  std::string output(*size + 1, '\0');
  auto decoded = decode(input, max_memory, output.data(), *size);
  if (!decoded)
    return fail(decoded.error());
  if (*decoded > *size)
    return fail(error("cannot decompress: longer than its index says"));
  output.resize(*decoded);
  return output;
}

} // namespace flamebpf::symbolize
