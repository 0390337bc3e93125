#include "pipeline/render.h"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <optional>

#include "common/file_content.h"
#include "common/log.h"
#include "dumps/dump_files.h"
#include "dumps/dump_merge.h"
#include "emit/diff_folded.h"
#include "emit/formats.h"
#include "emit/svg.h"
#include "pipeline/outputs.h"
#include "profile/folded_reader.h"

namespace flamebpf::pipeline {
namespace {

// Adds folded files to tree; with prune_share, drops what a drawing would leave out.
Result<> add_inputs(emit::FlameTree& tree,
                    const std::vector<std::string>& paths,
                    emit::Side side,
                    double prune_share = 0)
{
  // Several inputs become one text, so the tree is built (and pruned) in one sorted pass.
  std::optional<FileContent> text;
  if (paths.size() == 1) {
    auto content = FileContent::read(paths.front());
    if (!content)
      return fail(usage_error(content.error().message));
    text.emplace(std::move(*content));
  } else {
    std::string joined;
    for (const auto& path : paths) {
      auto content = FileContent::read(path);
      if (!content)
        return fail(usage_error(content.error().message));
      joined += content->view();
      if (!joined.empty() && joined.back() != '\n')
        joined.push_back('\n');
    }
    text.emplace(std::move(joined));
  }
  uint64_t bad = tree.add_folded(std::move(*text), side, prune_share);
  if (bad > 0)
    spdlog::warn("skipped {} lines that are not folded stacks (\"frame;frame;… count\")", bad);
  return {};
}

std::string joined(const std::vector<std::string>& paths)
{
  std::string text;
  for (const auto& path : paths)
    text += (text.empty() ? "" : ", ") + path;
  return text;
}

} // namespace

Result<> render(const cli::Config& config)
{
  if (emit::format_of_path(config.output) != emit::Format::kSvg) {
    auto input = profile::read_folded_files(config.render_inputs);
    if (!input)
      return fail(input.error());
    return write_profile(config.output, input->profile, config.graph);
  }
  // Folded text goes straight into the tree: no copy of each frame on the way.
  emit::SvgOptions options = config.graph;
  emit::FlameTree tree;
  if (auto added = add_inputs(tree, config.render_inputs, emit::kAfter, emit::drawn_share(options));
      !added)
    return fail(added.error());
  options.subtitle =
      fmt::format("{} \xC2\xB7 {} samples", joined(config.render_inputs), tree.total());
  return write_output(config.output,
                      [&](std::ostream& out) { return emit::write_svg(tree, options, out); });
}

Result<> diff(const cli::Config& config)
{
  emit::Format format = emit::format_of_path(config.output);
  // pprof has no differential form of its own: pprof itself compares two profiles.
  if (format == emit::Format::kPprof)
    return fail(
        usage_error("diff writes FILE.svg or folded text, not pprof (" + config.output +
                    "); for pprof, try: go tool pprof -diff_base BEFORE.pb.gz AFTER.pb.gz"));
  if (format == emit::Format::kFolded) {
    auto before = profile::read_folded_files({config.diff_before});
    if (!before)
      return fail(before.error());
    auto after = profile::read_folded_files({config.diff_after});
    if (!after)
      return fail(after.error());
    return write_output(config.output, [&](std::ostream& out) {
      return emit::write_diff_folded(before->profile, after->profile, config.normalize, out);
    });
  }

  emit::FlameTree tree;
  if (auto added = add_inputs(tree, {config.diff_before}, emit::kBefore); !added)
    return fail(added.error());
  if (auto added = add_inputs(tree, {config.diff_after}, emit::kAfter); !added)
    return fail(added.error());
  uint64_t before_total = tree.total(emit::kBefore);
  uint64_t after_total = tree.total(emit::kAfter);
  if (config.normalize)
    tree.scale_before(emit::normalization_factor(before_total, after_total));
  emit::SvgOptions options = config.graph;
  options.subtitle = fmt::format(
      "{} ({} samples) \xE2\x86\x92 {} ({} samples){} \xC2\xB7 drawn over {} \xC2\xB7 red grew, "
      "blue shrank",
      config.diff_before, before_total, config.diff_after, after_total,
      config.normalize ? ", normalized" : "", config.negate ? "before" : "after");
  emit::DiffOptions diff_options;
  diff_options.shape = config.negate ? emit::kBefore : emit::kAfter;
  return write_output(config.output, [&](std::ostream& out) {
    return emit::write_svg(tree, options, out, &diff_options);
  });
}

Result<> merge(const cli::Config& config)
{
  std::string directory = config.merge_dir;
  while (directory.size() > 1 && directory.back() == '/')
    directory.pop_back();
  auto merged = dumps::merge_dumps(directory, config.merge_from, config.merge_to);
  if (!merged)
    return fail(merged.error());
  emit::SvgOptions graph = config.graph;
  graph.subtitle =
      emit::describe_profile(merged->profile) + fmt::format(" \xC2\xB7 {} dumps", merged->dumps);
  spdlog::info("merged {} dumps of {} ({})", merged->dumps,
               std::filesystem::path(directory).filename().string(),
               dumps::window_name(merged->span));
  return write_profile(config.output, merged->profile, graph);
}

} // namespace flamebpf::pipeline
