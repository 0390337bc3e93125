// The output formats, chosen by file name: folded stacks, SVG flame graph, gzipped pprof.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "emit/emitter.h"
#include "emit/svg.h"

namespace flamebpf::emit {

enum class Format { kFolded, kSvg, kPprof };

// ".folded", ".svg", ".pb.gz".
std::string_view extension(Format format);

// The format a path's extension names: ".svg" SVG, ".pb.gz" pprof, anything else folded.
Format format_of_path(std::string_view path);

// "folded", "svg" or "pprof" (--format); nullopt for anything else.
std::optional<Format> parse_format(std::string_view name);

// An emitter of format; svg styles the flame graph (its target_frame the folded output too).
std::unique_ptr<Emitter> make_emitter(Format format, const SvgOptions& svg);

} // namespace flamebpf::emit
