#include "dumps/dump_merge.h"

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fmt/format.h>
#include <vector>

#include "profile/folded_reader.h"

namespace flamebpf::dumps {

Result<MergedDumps> merge_dumps(const std::string& directory,
                                std::optional<Clock::time_point> from,
                                std::optional<Clock::time_point> to,
                                uint64_t max_bytes)
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
    bytes += dump.bytes;
    if (bytes > max_bytes)
      return fail(Error{EFBIG,
                        fmt::format("the dumps of {} in that range hold more than {} MiB; ask "
                                    "for a shorter range",
                                    directory, max_bytes >> 20),
                        true});
    inputs.push_back(directory + "/" + *folded);
    span = span ? Window{span->start, dump.window.end} : dump.window;
  }
  if (inputs.empty())
    return fail(usage_error("no folded dump in " + directory +
                            " lies within the range; agent mode writes them with --format folded"));
  auto input = profile::read_folded_files(inputs);
  if (!input)
    return fail(input.error());
  MergedDumps merged;
  merged.profile = std::move(input->profile);
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
