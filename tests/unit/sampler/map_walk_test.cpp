#include <cerrno>
#include <gtest/gtest.h>
#include <map>
#include <string>

#include "sampler/map_walk.h"

namespace flamebpf::sampler {
namespace {

// An in-memory hash map behind MapCalls, with switches that make its calls fail. The calls are
// plain function pointers, so the map they reach is a global one.
struct FakeMap {
  std::map<uint32_t, uint64_t> entries;
  bool batch_supported = true;
  int batch_errno = 0;  // nonzero: every batch call fails with it
  int remove_errno = 0; // nonzero: every removal fails with it
  int batch_calls = 0;
  int lookups = 0;
};

FakeMap fake;

int fail_with(int errno_value)
{
  errno = errno_value;
  return -errno_value;
}

int fake_get_next_key(int, const void* key, void* next_key)
{
  auto it =
      key ? fake.entries.upper_bound(*static_cast<const uint32_t*>(key)) : fake.entries.begin();
  if (it == fake.entries.end())
    return fail_with(ENOENT);
  *static_cast<uint32_t*>(next_key) = it->first;
  return 0;
}

int fake_lookup(int, const void* key, void* value)
{
  ++fake.lookups;
  auto it = fake.entries.find(*static_cast<const uint32_t*>(key));
  if (it == fake.entries.end())
    return fail_with(ENOENT);
  *static_cast<uint64_t*>(value) = it->second;
  return 0;
}

int fake_remove(int, const void* key)
{
  if (fake.remove_errno)
    return fail_with(fake.remove_errno);
  return fake.entries.erase(*static_cast<const uint32_t*>(key)) ? 0 : fail_with(ENOENT);
}

// Hands out every entry in one batch, as the kernel does when they fit.
int fake_batch(int, void*, void*, void* keys, void* values, __u32* count, const bpf_map_batch_opts*)
{
  ++fake.batch_calls;
  if (!fake.batch_supported)
    return fail_with(EINVAL);
  if (fake.batch_errno)
    return fail_with(fake.batch_errno);
  __u32 taken = 0;
  for (const auto& [key, value] : fake.entries) {
    static_cast<uint32_t*>(keys)[taken] = key;
    static_cast<uint64_t*>(values)[taken] = value;
    ++taken;
  }
  fake.entries.clear();
  *count = taken;
  return fail_with(ENOENT);
}

constexpr MapCalls kFakeCalls{fake_get_next_key, fake_lookup, fake_remove, fake_batch};

class MapWalkTest : public ::testing::Test {
protected:
  void SetUp() override
  {
    fake = FakeMap{};
    fake.entries = {{1, 10}, {2, 20}, {7, 70}};
  }

  Result<std::vector<MapEntry<uint32_t, uint64_t>>> take()
  {
    return take_entries<uint32_t, uint64_t>(-1, 16, "the fake map", kFakeCalls);
  }
};

void expect_all_taken(const std::vector<MapEntry<uint32_t, uint64_t>>& taken)
{
  std::map<uint32_t, uint64_t> seen;
  for (const auto& entry : taken)
    seen[entry.key] = entry.value;
  EXPECT_EQ(seen, (std::map<uint32_t, uint64_t>{{1, 10}, {2, 20}, {7, 70}}));
  EXPECT_TRUE(fake.entries.empty());
}

TEST_F(MapWalkTest, BatchTakesEveryEntry)
{
  auto taken = take();
  ASSERT_TRUE(taken) << taken.error().message;
  expect_all_taken(*taken);
  EXPECT_EQ(fake.lookups, 0);
}

TEST_F(MapWalkTest, FallsBackToOneKeyAtATimeWithoutBatchOperations)
{
  fake.batch_supported = false;
  auto taken = take();
  ASSERT_TRUE(taken) << taken.error().message;
  expect_all_taken(*taken);
  EXPECT_EQ(fake.batch_calls, 1);
  EXPECT_EQ(fake.lookups, 3);
}

TEST_F(MapWalkTest, FailedRemovalFailsBothPathsAlike)
{
  fake.batch_errno = EPERM;
  auto batch = take();
  ASSERT_FALSE(batch);

  SetUp();
  fake.batch_supported = false;
  fake.remove_errno = EPERM;
  auto one_by_one = take();
  ASSERT_FALSE(one_by_one);
  EXPECT_GT(fake.lookups, 0); // the fallback ran

  EXPECT_EQ(batch.error().errno_value, EPERM);
  EXPECT_EQ(one_by_one.error().errno_value, EPERM);
  EXPECT_EQ(batch.error().message, one_by_one.error().message);
  EXPECT_NE(one_by_one.error().message.find("cannot drain the fake map"), std::string::npos);
}

TEST_F(MapWalkTest, KeysListsEveryKeyInOrder)
{
  auto keys = map_keys<uint32_t>(-1, "the fake map", kFakeCalls);
  ASSERT_TRUE(keys) << keys.error().message;
  EXPECT_EQ(*keys, (std::vector<uint32_t>{1, 2, 7}));
}

TEST_F(MapWalkTest, ClearRemovesEveryEntryAndReportsAFailedRemoval)
{
  ASSERT_TRUE(clear_map<uint32_t>(-1, "the fake map", kFakeCalls));
  EXPECT_TRUE(fake.entries.empty());

  SetUp();
  fake.remove_errno = EPERM;
  auto cleared = clear_map<uint32_t>(-1, "the fake map", kFakeCalls);
  ASSERT_FALSE(cleared);
  EXPECT_EQ(cleared.error().errno_value, EPERM);
}

} // namespace
} // namespace flamebpf::sampler
