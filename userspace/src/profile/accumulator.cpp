#include "profile/accumulator.h"

#include <algorithm>
#include <string_view>

#include "common/hashing.h"

namespace flamebpf::profile {
namespace {

// A keyed hash of what makes a stack itself: process, target and every frame (where it may be
// named later included: unnamed code at two addresses reads alike, and may be named apart). The
// index holds the hash, not the names a second time; stacks of one hash are compared whole, and
// the key keeps a target from making its stacks collide on purpose.
uint64_t identity_hash(const Stack& stack)
{
  SipHash hash(content_hash_key());
  auto add_text = [&](std::string_view text) {
    hash.update(uint64_t{text.size()});
    hash.update(text);
  };
  hash.update(uint64_t{stack.pid});
  add_text(stack.comm);
  add_text(stack.target);
  for (const auto& frame : stack.frames) {
    hash.update(static_cast<uint64_t>(frame.kind) | uint64_t{frame.late} << 8);
    if (frame.line != 0)
      hash.update(uint64_t{frame.line});
    add_text(frame.name);
    add_text(frame.module);
  }
  return hash.finish();
}

bool same_identity(const Stack& a, const Stack& b)
{
  return a.pid == b.pid && a.comm == b.comm && a.target == b.target &&
         std::equal(a.frames.begin(), a.frames.end(), b.frames.begin(), b.frames.end(),
                    [](const Frame& x, const Frame& y) { return x == y && x.late == y.late; });
}

// About what a stack takes on the heap, and its entry in the index.
size_t held_by(const Stack& stack)
{
  // Each node of the index: the hash, the position and the hash table's own pointers.
  constexpr size_t kIndexEntry = sizeof(uint64_t) + sizeof(size_t) + 4 * sizeof(void*);
  size_t bytes = sizeof(Stack) + stack.comm.size() + stack.target.size() + kIndexEntry;
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
    uint64_t hash = identity_hash(stack);
    auto [first, last] = index_.equal_range(hash);
    auto found = std::find_if(first, last, [&](const auto& entry) {
      return same_identity(total_.stacks[entry.second], stack);
    });
    if (found == last) {
      index_.emplace(hash, total_.stacks.size());
      held_bytes_ += held_by(stack);
      total_.stacks.push_back(std::move(stack));
    } else {
      Stack& same = total_.stacks[found->second];
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
