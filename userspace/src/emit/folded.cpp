#include "emit/folded.h"

#include <map>

namespace flamebpf::emit {
namespace {

void append_sanitized(std::string& out, const std::string& text)
{
  if (text.empty()) {
    out += "[unknown]";
    return;
  }
  for (char c : text) {
    if (c == ';')
      out.push_back(':');
    else if (c == '\n' || c == '\r' || c == '\t' || c == '\0')
      out.push_back(' ');
    else
      out.push_back(c);
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
