#include "emit/formats.h"

#include "emit/folded.h"
#include "emit/pprof.h"

namespace flamebpf::emit {

std::string_view extension(Format format)
{
  switch (format) {
  case Format::kSvg:
    return ".svg";
  case Format::kPprof:
    return ".pb.gz";
  case Format::kFolded:
    break;
  }
  return ".folded";
}

Format format_of_path(std::string_view path)
{
  if (path.ends_with(".svg") || path.ends_with(".SVG"))
    return Format::kSvg;
  if (path.ends_with(".pb.gz"))
    return Format::kPprof;
  return Format::kFolded;
}

std::optional<Format> parse_format(std::string_view name)
{
  if (name == "folded")
    return Format::kFolded;
  if (name == "svg")
    return Format::kSvg;
  if (name == "pprof")
    return Format::kPprof;
  return std::nullopt;
}

std::unique_ptr<Emitter> make_emitter(Format format, const SvgOptions& svg)
{
  switch (format) {
  case Format::kSvg:
    return std::make_unique<SvgEmitter>(svg);
  case Format::kPprof:
    return std::make_unique<PprofEmitter>();
  case Format::kFolded:
    break;
  }
  return std::make_unique<FoldedEmitter>(svg.target_frame);
}

} // namespace flamebpf::emit
