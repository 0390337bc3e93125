#include "profile/by_target.h"

#include <fmt/format.h>

#include "common/hashing.h"

namespace flamebpf::profile {
namespace {

// The stats file sits beside the target directories of agent mode.
constexpr std::string_view kReservedName = "flamebpf-stats.jsonl";
constexpr size_t kMarkLength = 9; // "_" and 8 hex digits

bool portable(char c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

// Names that some file systems fold together or refuse: any with a capital (Web and web are one
// file where case is ignored, as on a laptop the dumps are copied to), one ending in '.', and
// Windows' device names (con, nul.folded, com1, ...).
bool any_file_system_takes(std::string_view name)
{
  for (char c : name) {
    if (c >= 'A' && c <= 'Z')
      return false;
  }
  if (name.back() == '.')
    return false;
  std::string_view stem = name.substr(0, name.find('.'));
  for (std::string_view device : {"con", "prn", "aux", "nul"}) {
    if (stem == device)
      return false;
  }
  bool numbered = stem.size() == 4 && (stem.starts_with("com") || stem.starts_with("lpt")) &&
                  stem[3] >= '0' && stem[3] <= '9';
  return !numbered;
}

bool hex_digit(char c)
{
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

// Whether name ends as a marked name does: "_" and 8 hex digits.
bool looks_marked(std::string_view name)
{
  if (name.size() < kMarkLength || name[name.size() - kMarkLength] != '_')
    return false;
  for (char c : name.substr(name.size() - kMarkLength + 1)) {
    if (!hex_digit(c))
      return false;
  }
  return true;
}

bool kept_as_is(std::string_view target)
{
  if (target.empty() || target.size() > kMaxTargetFileName || target.front() == '.' ||
      target == kReservedName || looks_marked(target))
    return false;
  for (char c : target) {
    if (!portable(c))
      return false;
  }
  return any_file_system_takes(target);
}

// FNV-1a: stable across runs and builds, which is all a mark needs; uniqueness against crafted
// collisions is target_file_names' job.
uint64_t name_hash(std::string_view target, uint64_t salt)
{
  return Fnv1a(salt).add(target).value();
}

std::string marked(std::string_view target, uint64_t salt)
{
  std::string name;
  for (char c : target.substr(0, kMaxTargetFileName))
    name.push_back(portable(c) ? c : '_');
  if (name.empty() || name.front() == '.')
    name.insert(name.begin(), '_');
  uint64_t hash = name_hash(target, salt);
  return fmt::format("{}_{:08x}", name, static_cast<uint32_t>(hash ^ (hash >> 32)));
}

} // namespace

std::map<std::string, std::vector<size_t>> stacks_by_target(const SymbolizedProfile& profile)
{
  std::map<std::string, std::vector<size_t>> indexes;
  for (size_t i = 0; i < profile.stacks.size(); ++i)
    indexes[profile.stacks[i].target].push_back(i);
  return indexes;
}

SymbolizedProfile target_part(const SymbolizedProfile& profile,
                              const std::string& target,
                              const std::vector<size_t>& indexes)
{
  SymbolizedProfile part;
  part.start = profile.start;
  part.end = profile.end;
  part.frequency_hz = profile.frequency_hz;
  part.counters = profile.counters;
  part.node = profile.node;
  if (auto labels = profile.target_labels.find(target); labels != profile.target_labels.end())
    part.target_labels.insert(*labels);
  part.stacks.reserve(indexes.size());
  for (size_t index : indexes) {
    const Stack& stack = profile.stacks[index];
    if (auto labels = profile.pod_container_labels.find(stack.pod_container_id);
        labels != profile.pod_container_labels.end())
      part.pod_container_labels.insert(*labels);
    // Only the build IDs of the part's own files: the whole profile's, copied to each of a
    // node's targets, would cost more than most parts' stacks.
    for (const Frame& frame : stack.frames) {
      if (frame.module.empty() || part.build_ids.contains(frame.module))
        continue;
      if (auto id = profile.build_ids.find(frame.module); id != profile.build_ids.end())
        part.build_ids.insert(*id);
    }
    part.stacks.push_back(stack);
  }
  return part;
}

std::map<std::string, SymbolizedProfile> split_by_target(const SymbolizedProfile& profile)
{
  std::map<std::string, SymbolizedProfile> parts;
  for (const auto& [target, indexes] : stacks_by_target(profile))
    parts.emplace(target, target_part(profile, target, indexes));
  return parts;
}

std::string target_file_name(std::string_view target)
{
  return kept_as_is(target) ? std::string(target) : marked(target, 0);
}

std::map<std::string, std::string> target_file_names(const std::set<std::string>& targets)
{
  std::map<std::string, std::string> names;
  std::set<std::string> taken;
  // A kept name is never marked, so those go first and always keep their names.
  for (const auto& target : targets) {
    if (kept_as_is(target)) {
      names[target] = target;
      taken.insert(target);
    }
  }
  for (const auto& target : targets) {
    if (kept_as_is(target))
      continue;
    std::string name = marked(target, 0);
    for (uint64_t salt = 1; taken.contains(name); ++salt)
      name = marked(target, salt);
    names[target] = name;
    taken.insert(name);
  }
  return names;
}

} // namespace flamebpf::profile
