// The one way the sampler walks a BPF map: list its keys, take (read and remove) its entries, or
// clear it. Taking uses the kernel's batch operation where the map supports it and falls back to
// one key at a time; both paths fail the same way when an entry cannot be removed.
#pragma once

#include <bpf/bpf.h>
#include <cerrno>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"

namespace flamebpf::sampler {

// The libbpf calls a walk makes (each returns 0, or -1 or -errno with errno set), replaceable so
// that tests can make any of them fail.
struct MapCalls {
  int (*get_next_key)(int fd, const void* key, void* next_key) = bpf_map_get_next_key;
  int (*lookup)(int fd, const void* key, void* value) = bpf_map_lookup_elem;
  int (*remove)(int fd, const void* key) = bpf_map_delete_elem;
  int (*lookup_and_delete_batch)(int fd,
                                 void* in_batch,
                                 void* out_batch,
                                 void* keys,
                                 void* values,
                                 __u32* count,
                                 const bpf_map_batch_opts* opts) = bpf_map_lookup_and_delete_batch;
};

// One entry taken from a map.
template <class Key, class Value> struct MapEntry {
  Key key{};
  Value value{};
};

// Every key of the map at fd, in the kernel's order. what names the map in the error.
template <class Key>
[[nodiscard]] Result<std::vector<Key>>
map_keys(int fd, const std::string& what, const MapCalls& calls = {})
{
  std::vector<Key> keys;
  Key next{};
  while (calls.get_next_key(fd, keys.empty() ? nullptr : &keys.back(), &next) == 0)
    keys.push_back(next);
  if (errno != ENOENT) // ENOENT: no key after the last one
    return fail(system_error(errno, "cannot list the entries of " + what));
  return keys;
}

// Removes the given keys of the map at fd. A key already gone is no failure; any other failed
// removal is, since the entry would be counted again at the next walk.
template <class Key>
[[nodiscard]] Result<>
remove_keys(int fd, const std::vector<Key>& keys, const std::string& what, const MapCalls& calls)
{
  for (const Key& key : keys) {
    if (calls.remove(fd, &key) != 0 && errno != ENOENT)
      return fail(system_error(errno, "cannot drain " + what));
  }
  return {};
}

// Removes every entry of the map at fd.
template <class Key>
[[nodiscard]] Result<> clear_map(int fd, const std::string& what, const MapCalls& calls = {})
{
  auto keys = map_keys<Key>(fd, what, calls);
  if (!keys)
    return fail(keys.error());
  return remove_keys(fd, *keys, what, calls);
}

namespace detail {

// The kernel's ENOTSUPP (no userspace errno name): the map type has no batch operations.
inline constexpr int kKernelNotSupported = 524;

// Whether a failed first batch call means "no batch operations here" rather than a failure.
inline bool batch_unsupported(int errno_value)
{
  return errno_value == EINVAL || errno_value == EOPNOTSUPP || errno_value == kKernelNotSupported;
}

} // namespace detail

// Reads and removes every entry of the map at fd, which holds at most capacity entries: in
// batches where the kernel supports them, else one key at a time. Either way, an entry that
// cannot be removed fails the walk with "cannot drain <what>: <reason>".
template <class Key, class Value>
[[nodiscard]] Result<std::vector<MapEntry<Key, Value>>>
take_entries(int fd, uint32_t capacity, const std::string& what, const MapCalls& calls = {})
{
  std::vector<MapEntry<Key, Value>> entries;
  std::vector<Key> keys(capacity);
  std::vector<Value> values(capacity);
  Key batch_token{};
  bool first = true;
  for (;;) {
    __u32 count = capacity;
    int rc = calls.lookup_and_delete_batch(fd, first ? nullptr : &batch_token, &batch_token,
                                           keys.data(), values.data(), &count, nullptr);
    int saved_errno = errno;
    if (rc != 0 && saved_errno != ENOENT) {
      if (first && detail::batch_unsupported(saved_errno))
        break; // one key at a time, below
      return fail(system_error(saved_errno, "cannot drain " + what));
    }
    for (__u32 i = 0; i < count; ++i)
      entries.push_back({keys[i], values[i]});
    if (rc != 0) // ENOENT: that was the last batch
      return entries;
    first = false;
  }

  auto all_keys = map_keys<Key>(fd, what, calls);
  if (!all_keys)
    return fail(all_keys.error());
  std::vector<Key> taken;
  for (const Key& key : *all_keys) {
    MapEntry<Key, Value> entry{key, {}};
    if (calls.lookup(fd, &key, &entry.value) != 0) {
      if (errno == ENOENT)
        continue; // removed since it was listed
      return fail(system_error(errno, "cannot drain " + what));
    }
    entries.push_back(entry);
    taken.push_back(key);
  }
  if (auto removed = remove_keys(fd, taken, what, calls); !removed)
    return fail(removed.error());
  return entries;
}

} // namespace flamebpf::sampler
