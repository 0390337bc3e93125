#include "emit/folded.h"

#include <map>

#include "common/utf8.h"

namespace flamebpf::emit {
namespace {

// A name as one frame of a line of UTF-8 text: ';' would split it and a control character
// (a newline, an escape sequence for the terminal it is shown on) has no place in it; a byte
// outside any valid UTF-8 sequence becomes U+FFFD, as in every other output.
void append_sanitized(std::string& out, const std::string& text)
{
  if (text.empty()) {
    out += "[unknown]";
    return;
  }
  for (size_t at = 0; at < text.size();) {
    auto c = static_cast<unsigned char>(text[at]);
    if (c < 0x80) {
      out.push_back(c == ';' ? ':' : c < 0x20 || c == 0x7f ? ' ' : static_cast<char>(c));
      ++at;
      continue;
    }
    char32_t code_point = 0;
    size_t length = utf8::sequence_at(text, at, code_point);
    if (length == 0) {
      out += utf8::kReplacement;
      ++at;
    } else {
      out.append(text, at, length);
      at += length;
    }
  }
}

} // namespace

std::string folded_frame(const profile::Frame& frame)
{
  std::string text;
  append_sanitized(text, frame.name);
  // The suffixes of flamegraph.pl's java palette.
  if (frame.kind == profile::FrameKind::kKernel)
    text += "_[k]";
  else if (frame.kind == profile::FrameKind::kJit)
    text += "_[j]";
  else if (frame.kind == profile::FrameKind::kInlined)
    text += "_[i]";
  // An interpreted method has no suffix: the palette's name for a Java method that is not
  // compiled.
  return text;
}

std::string folded_stack(const profile::Stack& stack, bool target_frame)
{
  std::string line;
  if (target_frame) {
    append_sanitized(line, stack.target);
    line.push_back(';');
  }
  append_sanitized(line, stack.comm);
  for (const auto& frame : stack.frames) {
    line.push_back(';');
    line += folded_frame(frame);
  }
  return line;
}

Result<> FoldedEmitter::write(const profile::SymbolizedProfile& profile, std::ostream& out)
{
  // Stacks of different processes with the same names fold into one line.
  std::map<std::string, uint64_t> lines;
  for (const auto& stack : profile.stacks)
    lines[folded_stack(stack, target_frame_)] += stack.count;
  for (const auto& [line, count] : lines)
    out << line << ' ' << count << '\n';
  out.flush();
  if (!out)
    return fail(error("write failed"));
  return {};
}

} // namespace flamebpf::emit
