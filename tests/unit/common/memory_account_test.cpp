#include <atomic>
#include <gtest/gtest.h>
#include <set>
#include <string>
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
  EXPECT_TRUE(share->charge(MemoryKind::kSymbols, 60 * kMiB));
  EXPECT_FALSE(share->charge(MemoryKind::kSymbols, 5 * kMiB));
  EXPECT_TRUE(share->charge(MemoryKind::kSymbols, 4 * kMiB));
  EXPECT_EQ(account->held(), 64 * kMiB);
  EXPECT_EQ(share->refusals(), 1u);
}

TEST(MemoryAccount, EachTargetIsBoundedByItsPartOfTheAccount)
{
  auto account = MemoryAccount::create(64 * kMiB);
  auto a = account->share("a");
  auto b = account->share("b");
  EXPECT_EQ(account->share_limit(), 32 * kMiB);
  EXPECT_TRUE(a->charge(MemoryKind::kSymbols, 32 * kMiB));
  EXPECT_FALSE(a->charge(MemoryKind::kSymbols, 1));
  // The other target's part is untouched by the first one's refusals.
  EXPECT_TRUE(b->charge(MemoryKind::kSymbols, 32 * kMiB));
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
    kept += share->charge(MemoryKind::kSymbols, 10 * kMiB);
  EXPECT_EQ(kept, 16);
  EXPECT_EQ(account->held(), 160 * kMiB);
}

TEST(MemoryAccount, TheSameTargetHasOneShareWhileItLives)
{
  auto account = MemoryAccount::create(64 * kMiB);
  auto first = account->share("a");
  EXPECT_EQ(account->share("a"), first);
  EXPECT_EQ(account->live_shares(), 1u);
  EXPECT_TRUE(first->charge(MemoryKind::kSymbols, kMiB));
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
    MemoryCharge charge(share, MemoryKind::kSymbols);
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
        MemoryCharge charge(share, MemoryKind::kSymbols);
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

TEST(MemoryAccount, KeepsWhatItHoldsByKind)
{
  auto account = MemoryAccount::create(64 * kMiB);
  auto a = account->share("a");
  auto b = account->share("b");
  MemoryCharge symbols(a, MemoryKind::kSymbols);
  MemoryCharge inlines(a, MemoryKind::kInlines);
  MemoryCharge perf_map(b, MemoryKind::kPerfMaps);
  MemoryCharge records(b, MemoryKind::kJvmRecords);
  EXPECT_TRUE(symbols.grow(3 * kMiB));
  EXPECT_TRUE(inlines.grow(2 * kMiB));
  EXPECT_TRUE(perf_map.grow(kMiB));
  EXPECT_TRUE(records.grow(5));
  perf_map.shrink(kMiB / 2);
  auto breakdown = account->breakdown();
  EXPECT_EQ(breakdown.of(MemoryKind::kSymbols), 3 * kMiB);
  EXPECT_EQ(breakdown.of(MemoryKind::kInlines), 2 * kMiB);
  EXPECT_EQ(breakdown.of(MemoryKind::kPerfMaps), kMiB / 2);
  EXPECT_EQ(breakdown.of(MemoryKind::kJvmRecords), 5u);
  EXPECT_EQ(breakdown.of(MemoryKind::kDumps), 0u);
  EXPECT_EQ(breakdown.held, account->held());
  EXPECT_EQ(breakdown.total(), account->held());
  // A refused charge is in no kind.
  EXPECT_FALSE(inlines.grow(64 * kMiB));
  EXPECT_EQ(account->breakdown().of(MemoryKind::kInlines), 2 * kMiB);
  symbols.reset();
  inlines.reset();
  EXPECT_EQ(account->breakdown().of(MemoryKind::kSymbols), 0u);
  EXPECT_EQ(account->breakdown().total(), kMiB / 2 + 5);
}

TEST(MemoryAccount, MeasuredKindsAreNeverRefusedAndTakeNoTargetsRoom)
{
  auto account = MemoryAccount::create(16 * kMiB);
  auto share = account->share("a");
  MemoryCharge dumps(account, MemoryKind::kDumps);
  MemoryCharge answers(account, MemoryKind::kAnswers);
  // More than the whole account: flamebpf's own memory is measured, never refused.
  EXPECT_TRUE(dumps.grow(32 * kMiB));
  EXPECT_TRUE(answers.set(kMiB));
  EXPECT_EQ(account->held(), 0u);
  // The targets' room is untouched.
  EXPECT_TRUE(share->charge(MemoryKind::kSymbols, 16 * kMiB));
  auto breakdown = account->breakdown();
  EXPECT_EQ(breakdown.held, 16 * kMiB);
  EXPECT_EQ(breakdown.of(MemoryKind::kDumps), 32 * kMiB);
  EXPECT_EQ(breakdown.of(MemoryKind::kAnswers), kMiB);
  EXPECT_EQ(breakdown.total(), 49 * kMiB);
  // set() grows and shrinks to what the holder measured.
  EXPECT_TRUE(answers.set(kMiB / 4));
  EXPECT_TRUE(dumps.set(0));
  EXPECT_EQ(account->breakdown().total(), 16 * kMiB + kMiB / 4);
  MemoryCharge moved(std::move(answers));
  EXPECT_EQ(moved.kind(), MemoryKind::kAnswers);
  moved.reset();
  share->release(MemoryKind::kSymbols, 16 * kMiB);
  EXPECT_EQ(account->breakdown().total(), 0u);
}

TEST(MemoryAccount, AShareThatDiesGivesBackEachKind)
{
  auto account = MemoryAccount::create(64 * kMiB);
  auto share = account->share("a");
  EXPECT_TRUE(share->charge(MemoryKind::kPerfMaps, kMiB));
  EXPECT_TRUE(share->charge(MemoryKind::kJvmRecords, 2 * kMiB));
  share.reset();
  auto breakdown = account->breakdown();
  EXPECT_EQ(breakdown.of(MemoryKind::kPerfMaps), 0u);
  EXPECT_EQ(breakdown.of(MemoryKind::kJvmRecords), 0u);
  EXPECT_EQ(breakdown.total(), 0u);
}

// The heap's two kinds are measured from the allocator: what it allocated beyond the other kinds,
// and what it keeps free. Measuring leaves the other kinds as they are, and counts neither of its
// own kinds in what it subtracts (measuring twice gives the same). (Under ASan, whose allocator
// the C library's statistics do not see, both read 0.)
TEST(MemoryAccount, MeasuringTheHeapLeavesTheOtherKindsAsTheyAre)
{
  auto account = MemoryAccount::create(1 << 20);
  MemoryCharge symbols(account->share("web"), MemoryKind::kSymbols);
  ASSERT_TRUE(symbols.set(1000));
  account->measure_heap();
  auto first = account->breakdown();
  EXPECT_EQ(first.of(MemoryKind::kSymbols), 1000u);
  EXPECT_EQ(first.total(), 1000 + first.of(MemoryKind::kOther) + first.of(MemoryKind::kHeapFree));
  account->measure_heap();
  auto second = account->breakdown();
  EXPECT_EQ(second.of(MemoryKind::kSymbols), 1000u);
  EXPECT_LE(second.of(MemoryKind::kOther), first.of(MemoryKind::kOther) + (64 << 10));
  EXPECT_EQ(account->held(), 1000u) << "measured kinds are in no share";
}

TEST(MemoryAccount, EveryKindHasOneWordForAName)
{
  std::set<std::string> names;
  for (MemoryKind kind : kAllMemoryKinds) {
    std::string name = memory_kind_name(kind);
    EXPECT_EQ(name.find_first_not_of("abcdefghijklmnopqrstuvwxyz_"), std::string::npos) << name;
    names.insert(name);
  }
  EXPECT_EQ(names.size(), kMemoryKinds);
  EXPECT_EQ(static_cast<size_t>(kAllMemoryKinds.back()), kMemoryKinds - 1);
}

TEST(MemoryAccount, TheBreakdownAddsUpWhileManyThreadsChargeEveryKind)
{
  auto account = MemoryAccount::create(16 * kMiB);
  auto a = account->share("a");
  auto b = account->share("b");
  std::atomic<bool> stop{false};
  std::atomic<bool> disagreed{false};
  std::thread reader([&] {
    while (!stop) {
      auto breakdown = account->breakdown();
      uint64_t charged = 0;
      for (MemoryKind kind : {MemoryKind::kSymbols, MemoryKind::kInlines, MemoryKind::kPerfMaps,
                              MemoryKind::kJvmRecords, MemoryKind::kPythonCode})
        charged += breakdown.of(kind);
      if (charged != breakdown.held || breakdown.held > 16 * kMiB)
        disagreed = true;
    }
  });
  std::vector<std::thread> threads;
  for (size_t t = 0; t < kMemoryKinds; ++t)
    threads.emplace_back([&, t] {
      MemoryKind kind = kAllMemoryKinds[t];
      bool measured = t >= 5;
      for (int round = 0; round < 50; ++round) {
        MemoryCharge charge =
            measured ? MemoryCharge(account, kind) : MemoryCharge(t % 2 ? a : b, kind);
        for (int i = 0; i < 32 && charge.grow(64 * 1024); ++i) {
        }
      }
    });
  for (auto& thread : threads)
    thread.join();
  stop = true;
  reader.join();
  EXPECT_FALSE(disagreed);
  EXPECT_EQ(account->breakdown().total(), 0u);
  EXPECT_EQ(account->held(), 0u);
}

} // namespace
} // namespace flamebpf
