#include "profile/folded_reader.h"

#include <charconv>

#include "common/file_content.h"

namespace flamebpf::profile {

FrameKind folded_frame_kind(std::string_view& name)
{
  if (name.size() > 4 && name[name.size() - 4] == '_' && name[name.size() - 3] == '[' &&
      name.back() == ']') {
    char kind = name[name.size() - 2];
    if (kind == 'k' || kind == 'j' || kind == 'i') {
      name.remove_suffix(4);
      return kind == 'k' ? FrameKind::kKernel : kind == 'j' ? FrameKind::kJit : FrameKind::kInlined;
    }
  }
  return name == "[unknown]" ? FrameKind::kUnknown : FrameKind::kNative;
}

void parse_folded(std::string_view text, FoldedInput& input)
{
  while (!text.empty()) {
    size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    if (line.empty())
      continue;
    size_t space = line.rfind(' ');
    uint64_t count = 0;
    std::string_view number = space == std::string_view::npos ? "" : line.substr(space + 1);
    auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), count);
    std::string_view frames = space == std::string_view::npos ? "" : line.substr(0, space);
    if (number.empty() || ec != std::errc() || end != number.data() + number.size() ||
        frames.empty()) {
      ++input.bad_lines;
      continue;
    }
    Stack stack;
    stack.count = count;
    size_t semicolon = frames.find(';');
    stack.comm = std::string(frames.substr(0, semicolon));
    while (semicolon != std::string_view::npos) {
      frames.remove_prefix(semicolon + 1);
      semicolon = frames.find(';');
      std::string_view name = frames.substr(0, semicolon);
      FrameKind kind = folded_frame_kind(name);
      stack.frames.push_back({std::string(name), "", kind});
    }
    input.profile.stacks.push_back(std::move(stack));
  }
}

Result<> read_folded_file(const std::string& path, FoldedInput& input)
{
  auto content = FileContent::read(path);
  if (!content)
    return fail(content.error());
  parse_folded(content->view(), input);
  return {};
}

} // namespace flamebpf::profile
