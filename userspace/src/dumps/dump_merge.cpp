#include "dumps/dump_merge.h"

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fmt/format.h>
#include <vector>

#include "common/log.h"
#include "profile/accumulator.h"
#include "profile/folded_reader.h"

namespace flamebpf::dumps {

Result<MergedDumps> merge_dumps(const std::string& directory,
                                std::optional<Clock::time_point> from,
                                std::optional<Clock::time_point> to,
                                uint64_t max_bytes,
                                uint64_t max_held_bytes)
{
  std::vector<std::string> inputs;
  std::optional<Window> span;
  uint64_t bytes = 0;
  for (const auto& dump : list_dumps(directory)) {
    // Whole windows only: a dump that straddles an end of the range is left out.
    if ((from && dump.window.start < *from) || (to && dump.window.end > *to))
      continue;
    auto folded = std::find_if(dump.files.begin(), dump.files.end(),
                               [](const std::string& file) { return file.ends_with(".folded"); });
    if (folded == dump.files.end())
      continue;
    bytes += dump.folded_bytes;
    if (bytes > max_bytes)
      return fail(
          Error{EFBIG,
                fmt::format("the folded dumps of {} in that range hold more than {} MiB; ask "
                            "for a shorter range",
                            directory, max_bytes >> 20),
                true});
    inputs.push_back(directory + "/" + *folded);
    span = span ? Window{span->start, dump.window.end} : dump.window;
  }
  if (inputs.empty())
    return fail(usage_error("no folded dump in " + directory +
                            " lies within the range; agent mode writes them with --format folded"));
  profile::Accumulator sum;
  size_t bad_lines = 0;
  for (const auto& path : inputs) {
    profile::FoldedInput input;
    if (auto read = profile::read_folded_file(path, input); !read)
      return fail(usage_error(read.error().message));
    bad_lines += input.bad_lines;
    sum.add(std::move(input.profile));
    if (sum.held_bytes() > max_held_bytes)
      return fail(Error{EFBIG,
                        fmt::format("the dumps of {} in that range hold more distinct stacks than "
                                    "{} MiB can sum; ask for a shorter range",
                                    directory, max_held_bytes >> 20),
                        true});
  }
  if (bad_lines > 0)
    spdlog::warn("skipped {} lines that are not folded stacks (\"frame;frame;… count\")",
                 bad_lines);
  MergedDumps merged;
  merged.profile = sum.take();
  std::string target = std::filesystem::path(directory).filename();
  for (auto& stack : merged.profile.stacks)
    stack.target = target;
  merged.profile.start = span->start;
  merged.profile.end = span->end;
  merged.dumps = inputs.size();
  merged.span = *span;
  return merged;
}

} // namespace flamebpf::dumps
