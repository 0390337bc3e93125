#include "profile/accumulator.h"

namespace flamebpf::profile {
namespace {

// Identity of a stack: process, target and every frame. \x1d, \x1f and \x1e never occur in names.
std::string identity(const Stack& stack)
{
  std::string key = std::to_string(stack.pid);
  key += '\x1e';
  key += stack.comm;
  key += '\x1e';
  key += stack.target;
  for (const auto& frame : stack.frames) {
    key += '\x1e';
    key += static_cast<char>('0' + static_cast<int>(frame.kind));
    key += frame.name;
    key += '\x1f';
    key += frame.module;
    // Unnamed code at two addresses reads alike, and may be named apart later.
    if (frame.late != 0) {
      key += '\x1d';
      key += std::to_string(frame.late);
    }
  }
  return key;
}

// About what a stack takes on the heap, and its entry in the index (identity is key).
size_t held_by(const Stack& stack, const std::string& key)
{
  // Each node of the index: the key's string, the position and the hash table's own pointers.
  constexpr size_t kIndexEntry = sizeof(std::string) + sizeof(size_t) + 4 * sizeof(void*);
  size_t bytes = sizeof(Stack) + stack.comm.size() + stack.target.size() + kIndexEntry + key.size();
  for (const auto& frame : stack.frames)
    bytes += sizeof(Frame) + frame.name.size() + frame.module.size();
  return bytes;
}

} // namespace

void Accumulator::add(SymbolizedProfile interval)
{
  if (empty_) {
    total_.start = interval.start;
    total_.frequency_hz = interval.frequency_hz;
    empty_ = false;
  }
  total_.end = interval.end;
  total_.counters += interval.counters;
  total_.symbolize_stats += interval.symbolize_stats;
  total_.build_ids.merge(interval.build_ids);
  for (auto& [target, labels] : interval.target_labels)
    total_.target_labels.insert_or_assign(target, std::move(labels));
  for (auto& [id, labels] : interval.pod_container_labels)
    total_.pod_container_labels.insert_or_assign(id, std::move(labels));
  if (!interval.node.empty())
    total_.node = std::move(interval.node);
  for (auto& stack : interval.stacks) {
    auto [it, inserted] = index_.try_emplace(identity(stack), total_.stacks.size());
    if (inserted) {
      held_bytes_ += held_by(stack, it->first);
      total_.stacks.push_back(std::move(stack));
    } else {
      Stack& same = total_.stacks[it->second];
      same.count += stack.count;
      same.lost_samples += stack.lost_samples;
      same.cut_samples += stack.cut_samples;
    }
  }
}

SymbolizedProfile Accumulator::take()
{
  SymbolizedProfile taken = std::move(total_);
  total_ = SymbolizedProfile{};
  index_.clear();
  held_bytes_ = 0;
  empty_ = true;
  return taken;
}

} // namespace flamebpf::profile
