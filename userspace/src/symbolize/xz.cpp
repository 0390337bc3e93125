#include "symbolize/xz.h"

#include <algorithm>
#include <cerrno>
#include <lzma.h>

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

} // namespace

Result<std::string> xz_decompress(std::string_view input, size_t max_output, uint64_t max_memory)
{
  Decoder decoder;
  lzma_stream* stream = decoder.get();
  if (lzma_ret started = lzma_stream_decoder(stream, max_memory, 0); started != LZMA_OK)
    return fail(error("cannot decompress: " + describe(started)));
  stream->next_in = reinterpret_cast<const uint8_t*>(input.data());
  stream->avail_in = input.size();
  std::string output;
  // The output grows as it comes, so that a small stream costs little.
  constexpr size_t kStep = 256 << 10;
  for (;;) {
    if (stream->avail_out == 0) {
      if (output.size() >= max_output + 1)
        return fail(
            Error{EFBIG, "cannot decompress: more than " + std::to_string(max_output) + " bytes"});
      // One byte past the budget tells output that exactly fits from output that does not.
      size_t grown = std::min(max_output + 1, std::max(output.size() * 2, kStep));
      size_t used = output.size();
      output.resize(grown);
      stream->next_out = reinterpret_cast<uint8_t*>(output.data() + used);
      stream->avail_out = grown - used;
    }
    lzma_ret code = lzma_code(stream, LZMA_FINISH);
    if (code == LZMA_STREAM_END)
      break;
    if (code != LZMA_OK)
      return fail(error("cannot decompress: " + describe(code)));
  }
  output.resize(output.size() - stream->avail_out);
  if (output.size() > max_output)
    return fail(
        Error{EFBIG, "cannot decompress: more than " + std::to_string(max_output) + " bytes"});
  return output;
}

} // namespace flamebpf::symbolize
