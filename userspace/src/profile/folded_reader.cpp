#include "profile/folded_reader.h"

#include "common/file_content.h"
#include "common/log.h"

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

std::optional<FoldedLine> parse_folded_line(std::string_view line)
{
  size_t space = line.rfind(' ');
  if (space == std::string_view::npos || space == 0 || space + 1 == line.size())
    return std::nullopt;
  auto count = text::parse_number<uint64_t>(line.substr(space + 1));
  if (!count)
    return std::nullopt;
  return FoldedLine{line.substr(0, space), *count};
}

void parse_folded(std::string_view text, FoldedInput& input)
{
  input.bad_lines += for_each_folded_line(text, [&](const FoldedLine& line) {
    std::string_view frames = line.stack;
    Stack stack;
    stack.count = line.count;
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
  });
}

Result<> read_folded_file(const std::string& path, FoldedInput& input)
{
  auto content = FileContent::read(path);
  if (!content)
    return fail(content.error());
  parse_folded(content->view(), input);
  return {};
}

Result<FoldedInput> read_folded_files(const std::vector<std::string>& paths)
{
  FoldedInput input;
  for (const auto& path : paths) {
    if (auto read = read_folded_file(path, input); !read)
      return fail(usage_error(read.error().message));
  }
  if (input.bad_lines > 0)
    spdlog::warn("skipped {} lines that are not folded stacks (\"frame;frame;… count\")",
                 input.bad_lines);
  return input;
}

} // namespace flamebpf::profile
