#include "emit/svg.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>
#include <fmt/format.h>
#include <iterator>
#include <set>
#include <unordered_map>

namespace flamebpf::emit {

extern "C" const char flamebpf_svg_script_start[];
extern "C" const char flamebpf_svg_script_end[];
extern "C" const char flamebpf_svg_style_start[];
extern "C" const char flamebpf_svg_style_end[];

namespace {

constexpr double kFrameHeight = 16;
constexpr double kRectHeight = 15;
constexpr double kPadLeft = 10;
constexpr double kPadTop = 60;
constexpr double kPadBottom = 26;
constexpr double kFontSize = 12;
// Average glyph width of the sans-serif font at kFontSize, for fitting labels.
constexpr double kCharWidth = 0.59 * kFontSize;
// Names in tooltips and data attributes are cut here: a hostile 1 MB name stays a short line.
constexpr size_t kMaxNameBytes = 2048;

std::string_view embedded_script()
{
  return {flamebpf_svg_script_start, flamebpf_svg_script_end};
}

std::string_view embedded_style()
{
  return {flamebpf_svg_style_start, flamebpf_svg_style_end};
}

// Length of the UTF-8 sequence at text[i] if it is valid (and a character XML allows), else 0.
size_t valid_sequence(std::string_view text, size_t i, uint32_t& code_point)
{
  auto byte = [&](size_t at) { return static_cast<uint8_t>(text[at]); };
  uint8_t lead = byte(i);
  size_t length = lead < 0x80             ? 1
                  : (lead & 0xE0) == 0xC0 ? 2
                  : (lead & 0xF0) == 0xE0 ? 3
                  : (lead & 0xF8) == 0xF0 ? 4
                                          : 0;
  if (length == 0 || i + length > text.size())
    return 0;
  code_point = length == 1   ? lead
               : length == 2 ? lead & 0x1Fu
               : length == 3 ? lead & 0x0Fu
                             : lead & 0x07u;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80)
      return 0;
    code_point = (code_point << 6) | (byte(i + k) & 0x3Fu);
  }
  static constexpr uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  bool overlong = code_point < kSmallest[length];
  bool surrogate = code_point >= 0xD800 && code_point <= 0xDFFF;
  bool not_xml = (code_point < 0x20 && code_point != '\t') || code_point == 0xFFFE ||
                 code_point == 0xFFFF || code_point > 0x10FFFF;
  return overlong || surrogate || not_xml ? 0 : length;
}

void append_escaped(std::string& out, std::string_view text)
{
  for (char c : text) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    case '\'':
      out += "&apos;";
      break;
    case '\t':
      out += ' ';
      break;
    default:
      out += c;
    }
  }
}

// xml_text, appended to out.
void append_xml_text(std::string& out, std::string_view text, size_t max_bytes)
{
  size_t i = 0;
  while (i < text.size()) {
    if (i >= max_bytes) {
      out += "\xE2\x80\xA6"; // …
      break;
    }
    uint32_t code_point = 0;
    size_t length = valid_sequence(text, i, code_point);
    if (length == 0) {
      out += "\xEF\xBF\xBD"; // U+FFFD for what XML cannot carry
      ++i;
      continue;
    }
    append_escaped(out, text.substr(i, length));
    i += length;
  }
}

void append_number(std::string& out, uint64_t value)
{
  char digits[24];
  auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
  out.append(digits, end);
}

// Pixels to a tenth, without a trailing ".0": enough for the eye, and short.
void append_pixels(std::string& out, double value)
{
  auto tenths = static_cast<uint64_t>(std::llround(std::max(value, 0.0) * 10));
  append_number(out, tenths / 10);
  if (tenths % 10 != 0) {
    out += '.';
    out += static_cast<char>('0' + tenths % 10);
  }
}

size_t utf8_length(std::string_view text)
{
  size_t characters = 0;
  for (unsigned char c : text)
    characters += (c & 0xC0) != 0x80;
  return characters;
}

// The first `characters` characters of text.
std::string_view utf8_prefix(std::string_view text, size_t characters)
{
  size_t i = 0;
  for (; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      if (characters == 0)
        break;
      --characters;
    }
  }
  return text.substr(0, i);
}

std::string utc(std::chrono::system_clock::time_point time, const char* format)
{
  std::time_t seconds = std::chrono::system_clock::to_time_t(time);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char text[64];
  std::strftime(text, sizeof text, format, &tm);
  return text;
}

} // namespace

std::string svg_script_text()
{
  return "\n" + std::string(embedded_script());
}

double drawn_share(const SvgOptions& options)
{
  double drawable = std::max<double>(options.width, 200) - 2 * kPadLeft;
  return options.min_frame_width / drawable;
}

std::string xml_text(std::string_view text, size_t max_bytes)
{
  std::string out;
  out.reserve(std::min(text.size(), max_bytes) + 16);
  append_xml_text(out, text, max_bytes);
  return out;
}

std::string frame_label(std::string_view name, double width_px)
{
  auto fits = static_cast<size_t>(std::max(0.0, (width_px - 6) / kCharWidth));
  if (fits < 3)
    return "";
  if (utf8_length(name) <= fits)
    return std::string(name);
  return std::string(utf8_prefix(name, fits - 2)) + "..";
}

std::string describe_profile(const profile::SymbolizedProfile& profile)
{
  std::set<std::string> targets;
  for (const auto& stack : profile.stacks) {
    if (!stack.target.empty())
      targets.insert(stack.target);
  }
  std::vector<std::string> parts;
  if (targets.size() == 1)
    parts.push_back("target " + *targets.begin());
  else if (targets.size() > 1)
    parts.push_back(fmt::format("{} targets", targets.size()));
  if (profile.end > profile.start && profile.start.time_since_epoch().count() > 0)
    parts.push_back(utc(profile.start, "%Y-%m-%d %H:%M:%S") + "\xE2\x80\x93" +
                    utc(profile.end, "%H:%M:%S UTC"));
  if (profile.frequency_hz > 0)
    parts.push_back(fmt::format("{} Hz", profile.frequency_hz));
  parts.push_back(fmt::format("{} samples", profile.total_samples()));
  std::string line;
  for (const auto& part : parts)
    line += (line.empty() ? "" : " \xC2\xB7 ") + part;
  return line;
}

std::string describe_profile(const profile::SymbolizedProfile& profile,
                             const std::vector<profile::TargetCoverage>& coverage)
{
  std::string line = describe_profile(profile);
  std::string covered = profile::coverage_summary(coverage);
  return covered.empty() ? line : line + " \xC2\xB7 " + covered;
}

namespace {

struct Drawn {
  uint32_t node;
  uint64_t x;          // samples left of the frame at its depth
  uint32_t swatch = 0; // its colour's class, .c<swatch>
};

// A flame graph worked out before anything is written: which frames are drawn, where, in which
// colours.
struct Layout {
  Side shape = kAfter; // the side whose samples give the widths
  uint64_t total = 0;  // samples of that side
  double width = 0;    // pixels
  double height = 0;
  double drawable = 0;       // the frames' width: all but the padding
  double scale = 0;          // pixels per sample
  std::vector<Drawn> frames; // parents before children, siblings by name
  std::vector<Rgb> swatches; // the colours of the frames, by class: .c<index>
};

// Gives each frame the class of its colour: the palette is small, so a class name is shorter
// than a fill.
void paint(Layout& layout, const FlameTree& tree, bool diff)
{
  const auto& nodes = tree.nodes();
  uint64_t max_delta = 0;
  auto delta = [&](const FlameNode& node) {
    return static_cast<int64_t>(node.samples[kAfter]) - static_cast<int64_t>(node.samples[kBefore]);
  };
  if (diff) {
    for (const Drawn& frame : layout.frames)
      max_delta = std::max<uint64_t>(max_delta,
                                     static_cast<uint64_t>(std::llabs(delta(nodes[frame.node]))));
  }
  std::unordered_map<uint32_t, uint32_t> swatch_of;
  for (Drawn& frame : layout.frames) {
    const FlameNode& node = nodes[frame.node];
    Rgb colour = diff              ? diff_colour(delta(node), max_delta)
                 : frame.node == 0 ? Rgb{200, 200, 200}
                                   : frame_colour(node.name, node.kind);
    uint32_t key = uint32_t{colour.r} << 16 | uint32_t{colour.g} << 8 | colour.b;
    auto [it, added] = swatch_of.try_emplace(key, static_cast<uint32_t>(layout.swatches.size()));
    if (added)
      layout.swatches.push_back(colour);
    frame.swatch = it->second;
  }
}

// The frames of tree to draw (those at least the minimum width wide) and their colours.
Layout lay_out(const FlameTree& tree, const SvgOptions& options, const DiffOptions* diff)
{
  const auto& nodes = tree.nodes();
  Layout layout;
  layout.shape = diff ? diff->shape : kAfter;
  layout.total = tree.total(layout.shape);
  layout.width = std::max<double>(options.width, 200);
  layout.drawable = layout.width - 2 * kPadLeft;
  layout.scale = layout.total > 0 ? layout.drawable / static_cast<double>(layout.total) : 0;
  uint64_t min_samples = samples_for_share(layout.total, drawn_share(options));

  std::vector<Drawn> pending{{0, 0, 0}};
  std::vector<uint32_t> children;
  uint32_t max_depth = 0;
  while (!pending.empty()) {
    Drawn frame = pending.back();
    pending.pop_back();
    layout.frames.push_back(frame);
    const FlameNode& node = nodes[frame.node];
    max_depth = std::max(max_depth, node.depth);
    children.clear();
    for (uint32_t child = node.first_child; child != kNoNode; child = nodes[child].next_sibling) {
      if (nodes[child].samples[layout.shape] >= min_samples)
        children.push_back(child);
    }
    // Siblings by name, so that layouts compare.
    std::sort(children.begin(), children.end(), [&](uint32_t a, uint32_t b) {
      if (nodes[a].name != nodes[b].name)
        return nodes[a].name < nodes[b].name;
      return nodes[a].kind < nodes[b].kind;
    });
    uint64_t x = frame.x;
    size_t first = pending.size();
    for (uint32_t child : children) {
      pending.push_back({child, x, 0});
      x += nodes[child].samples[layout.shape];
    }
    std::reverse(pending.begin() + static_cast<ptrdiff_t>(first), pending.end());
  }
  layout.height = kPadTop + (max_depth + 1) * kFrameHeight + kPadBottom;
  paint(layout, tree, diff != nullptr);
  return layout;
}

// Everything before the frames: the document, its style, palette and script, the titles and the
// controls.
Result<> write_header(std::string& svg, const Layout& layout, const SvgOptions& options, bool diff)
{
  // The embedded code must not end its CDATA section early.
  if (embedded_script().find("]]>") != std::string_view::npos ||
      embedded_style().find("]]>") != std::string_view::npos)
    return fail(error("the embedded flame graph script or style contains \"]]>\""));
  auto emit = std::back_inserter(svg);
  fmt::format_to(emit,
                 "<?xml version=\"1.0\" standalone=\"no\"?>\n"
                 "<svg version=\"1.1\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
                 "xmlns=\"http://www.w3.org/2000/svg\" "
                 "xmlns:xlink=\"http://www.w3.org/1999/xlink\" data-total=\"{2}\" "
                 "data-mode=\"{3}\" data-inverted=\"{4}\" data-frame-height=\"{5}\" "
                 "data-pad-left=\"{6}\" data-pad-top=\"{7}\">\n",
                 layout.width, layout.height, layout.total, diff ? "diff" : "normal",
                 options.inverted ? 1 : 0, kFrameHeight, kPadLeft, kPadTop);
  svg += "<style type=\"text/css\"><![CDATA[\n";
  svg += embedded_style();
  for (size_t i = 0; i < layout.swatches.size(); ++i)
    fmt::format_to(emit, ".c{}{{fill:{}}}\n", i, css_colour(layout.swatches[i]));
  svg += "]]></style>\n<script type=\"text/ecmascript\"><![CDATA[";
  svg += svg_script_text();
  svg += "]]></script>\n";
  std::string subtitle =
      options.subtitle.empty() ? fmt::format("{} samples", layout.total) : options.subtitle;
  fmt::format_to(emit,
                 "<rect class=\"background\" x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\"/>\n"
                 "<text id=\"title\" x=\"{2}\" y=\"24\">{3}</text>\n"
                 "<text id=\"subtitle\" x=\"{2}\" y=\"42\">{4}</text>\n"
                 "<text id=\"unzoom\" class=\"hide\" x=\"{5}\" y=\"24\">Reset Zoom</text>\n"
                 "<text id=\"search\" x=\"{6}\" y=\"24\">Search</text>\n"
                 "<text id=\"matched\" x=\"{6}\" y=\"{7}\"> </text>\n"
                 "<text id=\"details\" x=\"{5}\" y=\"{7}\"> </text>\n",
                 layout.width, layout.height, layout.width / 2, xml_text(options.title),
                 xml_text(subtitle), kPadLeft, layout.width - 110, layout.height - 8);
  return {};
}

// The frames, each its samples, name and rectangle: the script works out the rest (its place in
// samples, its depth, its tooltip), so that a frame costs few bytes.
void write_frames(std::string& svg,
                  const FlameTree& tree,
                  const Layout& layout,
                  const SvgOptions& options,
                  bool diff)
{
  const auto& nodes = tree.nodes();
  svg += "<g id=\"frames\">\n";
  for (const Drawn& frame : layout.frames) {
    const FlameNode& node = nodes[frame.node];
    uint64_t samples = node.samples[layout.shape];
    double px = kPadLeft + static_cast<double>(frame.x) * layout.scale;
    double pw = frame.node == 0 && layout.total == 0 ? layout.drawable
                                                     : static_cast<double>(samples) * layout.scale;
    double py = options.inverted ? kPadTop + node.depth * kFrameHeight
                                 : layout.height - kPadBottom - (node.depth + 1) * kFrameHeight;
    svg += "<g class=\"f c";
    append_number(svg, frame.swatch);
    svg += "\" data-w=\"";
    append_number(svg, samples);
    if (diff) {
      svg += "\" data-b=\"";
      append_number(svg, node.samples[kBefore]);
      svg += "\" data-a=\"";
      append_number(svg, node.samples[kAfter]);
    }
    svg += "\" data-n=\"";
    append_xml_text(svg, node.name, kMaxNameBytes);
    svg += "\"><rect x=\"";
    append_pixels(svg, px);
    svg += "\" y=\"";
    append_pixels(svg, py);
    svg += "\" width=\"";
    append_pixels(svg, pw);
    svg += "\" height=\"";
    append_pixels(svg, kRectHeight);
    svg += "\"/>";
    std::string label = frame_label(node.name, pw);
    if (!label.empty()) {
      svg += "<text x=\"";
      append_pixels(svg, px + 3);
      svg += "\" y=\"";
      append_pixels(svg, py + 10.5);
      svg += "\">";
      append_xml_text(svg, label, kMaxNameBytes);
      svg += "</text>";
    }
    svg += "</g>\n";
  }
  svg += "</g>\n";
}

} // namespace

Result<> write_svg(const FlameTree& tree,
                   const SvgOptions& options,
                   std::ostream& out,
                   const DiffOptions* diff)
{
  Layout layout = lay_out(tree, options, diff);
  std::string svg;
  svg.reserve(layout.frames.size() * 150 + 32768);
  if (auto header = write_header(svg, layout, options, diff != nullptr); !header)
    return header;
  write_frames(svg, tree, layout, options, diff != nullptr);
  svg += "</svg>\n";
  out.write(svg.data(), static_cast<std::streamsize>(svg.size()));
  out.flush();
  if (!out)
    return fail(error("write failed"));
  return {};
}

Result<> SvgEmitter::write(const profile::SymbolizedProfile& profile, std::ostream& out)
{
  FlameTree tree;
  tree.add_profile(profile, options_.target_frame);
  SvgOptions options = options_;
  if (options.subtitle.empty())
    options.subtitle = describe_profile(profile);
  return write_svg(tree, options, out);
}

} // namespace flamebpf::emit
