// The sampler's map walk on real kernel maps: a hash map is taken in batches; an array map has no
// batch operations, so it is taken one key at a time, and since its entries cannot be removed
// that path must fail as the batch path does.
#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <string>
#include <unistd.h>

#include "common/unique_fd.h"
#include "sampler/map_walk.h"

namespace flamebpf::sampler {
namespace {

UniqueFd create_map(bpf_map_type type)
{
  return UniqueFd(
      bpf_map_create(type, "fb_walk_test", sizeof(uint32_t), sizeof(uint64_t), 8, nullptr));
}

TEST(MapWalk, TakesAHashMapInBatches)
{
  ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
  UniqueFd map = create_map(BPF_MAP_TYPE_HASH);
  ASSERT_GE(map.get(), 0) << "cannot create a hash map: " << errno;
  for (uint32_t key = 1; key <= 3; ++key) {
    uint64_t value = key * 10;
    ASSERT_EQ(bpf_map_update_elem(map.get(), &key, &value, BPF_ANY), 0);
  }
  auto taken = take_entries<uint32_t, uint64_t>(map.get(), 8, "the test map");
  ASSERT_TRUE(taken) << taken.error().message;
  ASSERT_EQ(taken->size(), 3u);
  for (const auto& entry : *taken)
    EXPECT_EQ(entry.value, entry.key * 10);
  auto left = map_keys<uint32_t>(map.get(), "the test map");
  ASSERT_TRUE(left) << left.error().message;
  EXPECT_TRUE(left->empty());
}

TEST(MapWalk, OneKeyAtATimeReportsAnEntryItCannotRemove)
{
  ASSERT_EQ(::geteuid(), 0u) << "integration tests load BPF: run as root";
  UniqueFd map = create_map(BPF_MAP_TYPE_ARRAY);
  ASSERT_GE(map.get(), 0) << "cannot create an array map: " << errno;
  auto taken = take_entries<uint32_t, uint64_t>(map.get(), 8, "the test map");
  ASSERT_FALSE(taken) << "an array's entries cannot be removed, yet the walk took "
                      << taken->size();
  // The kernel refuses to delete array entries with EINVAL.
  EXPECT_EQ(taken.error().errno_value, EINVAL);
  EXPECT_EQ(taken.error().message.rfind("cannot drain the test map: ", 0), 0u)
      << taken.error().message;
}

} // namespace
} // namespace flamebpf::sampler
