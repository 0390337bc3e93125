#include <atomic>
#include <gtest/gtest.h>
#include <thread>
#include <vector>

#include "common/memory_account.h"

namespace flamebpf {
namespace {

constexpr uint64_t kMiB = 1 << 20;

TEST(MemoryAccount, OneTargetMayHoldTheWholeAccount)
{
  auto account = MemoryAccount::create(64 * kMiB);
  auto share = account->share("a");
  EXPECT_TRUE(share->charge(60 * kMiB));
  EXPECT_FALSE(share->charge(5 * kMiB));
  EXPECT_TRUE(share->charge(4 * kMiB));
  EXPECT_EQ(account->held(), 64 * kMiB);
  EXPECT_EQ(share->refusals(), 1u);
}

TEST(MemoryAccount, EachTargetIsBoundedByItsPartOfTheAccount)
{
  auto account = MemoryAccount::create(64 * kMiB);
  auto a = account->share("a");
  auto b = account->share("b");
  EXPECT_EQ(account->share_limit(), 32 * kMiB);
  EXPECT_TRUE(a->charge(32 * kMiB));
  EXPECT_FALSE(a->charge(1));
  // The other target's part is untouched by the first one's refusals.
  EXPECT_TRUE(b->charge(32 * kMiB));
  EXPECT_EQ(account->held(), 64 * kMiB);
  EXPECT_EQ(account->largest().second, 32 * kMiB);
}

TEST(MemoryAccount, ManyTargetsKeepTheFloorButNeverPassTheTotal)
{
  auto account = MemoryAccount::create(160 * kMiB);
  std::vector<std::shared_ptr<MemoryShare>> shares;
  for (int i = 0; i < 40; ++i)
    shares.push_back(account->share("t" + std::to_string(i)));
  // 160 MiB among 40 targets is 4 MiB; a sixteenth is 10 MiB.
  EXPECT_EQ(account->share_limit(), 10 * kMiB);
  int kept = 0;
  for (auto& share : shares)
    kept += share->charge(10 * kMiB);
  EXPECT_EQ(kept, 16);
  EXPECT_EQ(account->held(), 160 * kMiB);
}

TEST(MemoryAccount, TheSameTargetHasOneShareWhileItLives)
{
  auto account = MemoryAccount::create(64 * kMiB);
  auto first = account->share("a");
  EXPECT_EQ(account->share("a"), first);
  EXPECT_EQ(account->live_shares(), 1u);
  EXPECT_TRUE(first->charge(kMiB));
  first.reset();
  EXPECT_EQ(account->live_shares(), 0u);
  EXPECT_EQ(account->held(), 0u);
  EXPECT_EQ(account->share("a")->held(), 0u);
}

TEST(MemoryCharge, GivesBackWhatItHeldWhenDestroyedMovedOrShrunk)
{
  auto account = MemoryAccount::create(64 * kMiB);
  auto share = account->share("a");
  {
    MemoryCharge charge(share);
    EXPECT_TRUE(charge.grow(10 * kMiB));
    EXPECT_FALSE(charge.grow(60 * kMiB));
    EXPECT_EQ(charge.bytes(), 10 * kMiB);
    charge.shrink(4 * kMiB);
    EXPECT_EQ(share->held(), 6 * kMiB);
    MemoryCharge moved(std::move(charge));
    EXPECT_EQ(share->held(), 6 * kMiB);
    // More than it holds gives back what it holds, never another holder's.
    moved.shrink(100 * kMiB);
    EXPECT_EQ(share->held(), 0u);
    EXPECT_TRUE(moved.grow(kMiB));
  }
  EXPECT_EQ(share->held(), 0u);
  EXPECT_EQ(account->held(), 0u);
}

TEST(MemoryCharge, WithoutAShareChargesAndRefusesNothing)
{
  MemoryCharge charge;
  EXPECT_TRUE(charge.grow(uint64_t{1} << 50));
  charge.reset();
  EXPECT_EQ(charge.bytes(), 0u);
}

TEST(MemoryAccount, ChargesFromManyThreadsNeverPassTheTotal)
{
  auto account = MemoryAccount::create(16 * kMiB);
  auto a = account->share("a");
  auto b = account->share("b");
  std::atomic<bool> passed{false};
  std::atomic<uint64_t> kept{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, share = t % 2 ? a : b] {
      for (int round = 0; round < 20; ++round) {
        MemoryCharge charge(share);
        while (charge.grow(64 * 1024))
          passed = passed || account->held() > 16 * kMiB || share->held() > 8 * kMiB;
        kept += charge.bytes();
      }
    });
  for (auto& thread : threads)
    thread.join();
  EXPECT_FALSE(passed);
  EXPECT_GT(kept.load(), 0u);
  EXPECT_EQ(account->held(), 0u);
}

} // namespace
} // namespace flamebpf
