#include "runtimes/node/node_runtime.h"

#include "symbolize/name_cut.h"

namespace flamebpf::node {
namespace {

bool is_node_file(std::string_view path)
{
  std::string_view file = path.substr(path.rfind('/') + 1);
  return file == "node" || file == "nodejs" || file.starts_with("libnode.so");
}

} // namespace

profile::Frame node_frame(std::string_view name)
{
  if (name == symbolize::kTruncated) // a name the reader's budget replaced
    return {std::string(name), "", profile::FrameKind::kUnknown};
  // V8 11 (Node 20) writes "JS:"; older ones the kind of code ("LazyCompile:" for a function).
  std::string_view rest;
  for (std::string_view prefix : {"JS:", "LazyCompile:", "Function:", "Script:", "Eval:"}) {
    if (name.starts_with(prefix) && name.size() > prefix.size()) {
      rest = name.substr(prefix.size());
      break;
    }
  }
  if (rest.empty())
    return {std::string(name), "", profile::FrameKind::kJit};
  auto kind = profile::FrameKind::kJit;
  switch (rest.front()) {
  case '~':
    kind = profile::FrameKind::kInterpreted;
    [[fallthrough]];
  case '^':
  case '+':
  case '*':
    rest.remove_prefix(1);
    break;
  default:
    break;
  }
  // An anonymous function (or a script's top level) has no name before its script.
  if (rest.empty() || rest.front() == ' ')
    return {"(anonymous)" + std::string(rest), "", kind};
  return {std::string(rest), "", kind};
}

void NodeRuntime::captured(symbolize::ProcessTable& processes,
                           const symbolize::ImageKey& key,
                           const symbolize::ProcessImage& image,
                           const std::vector<procfs::Mapping>& mappings)
{
  (void)processes, (void)image;
  for (const auto& mapping : mappings) {
    if (mapping.executable && mapping.file_backed() && is_node_file(mapping.path)) {
      images_.insert(key);
      return;
    }
  }
}

std::optional<runtimes::NamedCode> NodeRuntime::name_code(symbolize::ProcessTable& processes,
                                                          const symbolize::ImageKey& key,
                                                          uint64_t address,
                                                          bool anonymous)
{
  (void)anonymous;
  if (!images_.contains(key))
    return std::nullopt;
  runtimes::NamedCode named;
  auto entry = processes.perf_map_entry(key, address);
  if (!entry)
    return named;
  named.frames.push_back(node_frame(entry->name));
  named.cut_when_read = entry->truncated;
  return named;
}

void NodeRuntime::forget(const symbolize::ImageKey& key, bool exited)
{
  (void)exited;
  images_.erase(key);
}

} // namespace flamebpf::node
