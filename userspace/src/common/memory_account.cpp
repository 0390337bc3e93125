#include "common/memory_account.h"

#include <algorithm>
#include <malloc.h>
#include <utility>

#include "common/log.h"

namespace flamebpf {

namespace {

double mib(uint64_t bytes)
{
  return static_cast<double>(bytes) / (1 << 20);
}

size_t index(MemoryKind kind)
{
  return static_cast<size_t>(kind);
}

} // namespace

const char* memory_kind_name(MemoryKind kind)
{
  switch (kind) {
  case MemoryKind::kSymbols:
    return "symbols";
  case MemoryKind::kInlines:
    return "inlines";
  case MemoryKind::kPerfMaps:
    return "perf_maps";
  case MemoryKind::kJvmRecords:
    return "jvm_records";
  case MemoryKind::kPythonCode:
    return "python_code";
  case MemoryKind::kUnwindTables:
    return "unwind_tables";
  case MemoryKind::kContainerNames:
    return "container_names";
  case MemoryKind::kDumps:
    return "dumps";
  case MemoryKind::kAnswers:
    return "answers";
  case MemoryKind::kIntervals:
    return "intervals";
  case MemoryKind::kOther:
    return "other";
  case MemoryKind::kHeapFree:
    return "heap_free";
  }
  return "unknown";
}

uint64_t MemoryBreakdown::total() const
{
  uint64_t sum = 0;
  for (uint64_t kind_bytes : bytes)
    sum += kind_bytes;
  return sum;
}

MemoryShare::MemoryShare(std::shared_ptr<MemoryAccount> account, std::string target)
    : account_(std::move(account)), target_(std::move(target))
{
}

MemoryShare::~MemoryShare()
{
  account_->forget(*this);
}

bool MemoryShare::charge(MemoryKind kind, uint64_t bytes)
{
  uint64_t limit = 0;
  uint64_t held = 0;
  {
    std::lock_guard lock(account_->mutex_);
    limit = account_->share_limit_locked();
    bool fits = held_ + bytes <= limit && account_->held_ + bytes <= account_->total_;
    if (fits) {
      held_ += bytes;
      by_kind_[index(kind)] += bytes;
      account_->held_ += bytes;
      account_->by_kind_[index(kind)] += bytes;
      return true;
    }
    held = held_;
    if (refusals_++ != 0)
      return false;
  }
  if (held + bytes > limit)
    spdlog::warn("target {}: holds {:.1f} MiB, its share of flamebpf's memory for targets ({:.0f} "
                 "MiB of {:.0f} MiB among the live targets): further names of its code are not "
                 "kept; --target-memory raises the account",
                 target_, mib(held), mib(limit), mib(account_->total_));
  else
    spdlog::warn("target {}: flamebpf's memory for targets ({:.0f} MiB) is taken by the targets "
                 "together: further names of its code are not kept; --target-memory raises it",
                 target_, mib(account_->total_));
  return false;
}

void MemoryShare::release(MemoryKind kind, uint64_t bytes)
{
  std::lock_guard lock(account_->mutex_);
  bytes = std::min(bytes, by_kind_[index(kind)]);
  held_ -= bytes;
  by_kind_[index(kind)] -= bytes;
  account_->held_ -= bytes;
  account_->by_kind_[index(kind)] -= bytes;
}

uint64_t MemoryShare::held() const
{
  std::lock_guard lock(account_->mutex_);
  return held_;
}

uint64_t MemoryShare::refusals() const
{
  std::lock_guard lock(account_->mutex_);
  return refusals_;
}

std::shared_ptr<MemoryAccount> MemoryAccount::create(uint64_t total_bytes)
{
  return std::shared_ptr<MemoryAccount>(new MemoryAccount(total_bytes));
}

std::shared_ptr<MemoryShare> MemoryAccount::share(const std::string& target)
{
  std::lock_guard lock(mutex_);
  if (auto it = shares_.find(target); it != shares_.end()) {
    if (auto live = it->second.share.lock())
      return live;
  }
  auto made = std::make_shared<MemoryShare>(shared_from_this(), target);
  shares_[target] = Live{made, made.get()};
  return made;
}

uint64_t MemoryAccount::held() const
{
  std::lock_guard lock(mutex_);
  return held_;
}

MemoryBreakdown MemoryAccount::breakdown() const
{
  std::lock_guard lock(mutex_);
  MemoryBreakdown breakdown;
  breakdown.bytes = by_kind_;
  breakdown.held = held_;
  return breakdown;
}

void MemoryAccount::measure(MemoryKind kind, uint64_t added, uint64_t removed)
{
  std::lock_guard lock(mutex_);
  uint64_t& held = by_kind_[index(kind)];
  held += added;
  held -= std::min(held, removed);
}

void MemoryAccount::measure_heap()
{
  // uordblks: allocated in the arenas; hblkhd: allocated as mappings of their own; fordblks: free
  // in the arenas. Read before the lock: mallinfo2 walks the arenas.
  struct mallinfo2 heap = ::mallinfo2();
  std::lock_guard lock(mutex_);
  uint64_t measured = 0;
  for (size_t kind = 0; kind < kMemoryKinds; ++kind) {
    if (kind != index(MemoryKind::kOther) && kind != index(MemoryKind::kHeapFree))
      measured += by_kind_[kind];
  }
  uint64_t allocated = heap.uordblks + heap.hblkhd;
  by_kind_[index(MemoryKind::kOther)] = allocated - std::min(allocated, measured);
  by_kind_[index(MemoryKind::kHeapFree)] = heap.fordblks;
}

uint64_t MemoryAccount::share_limit_locked() const
{
  uint64_t divided = total_ / std::max<uint64_t>(1, shares_.size());
  return std::max(divided, total_ / kFloorDivisor);
}

uint64_t MemoryAccount::share_limit() const
{
  std::lock_guard lock(mutex_);
  return share_limit_locked();
}

size_t MemoryAccount::live_shares() const
{
  std::lock_guard lock(mutex_);
  return shares_.size();
}

std::pair<std::string, uint64_t> MemoryAccount::largest() const
{
  std::lock_guard lock(mutex_);
  std::pair<std::string, uint64_t> largest;
  for (const auto& [target, share] : shares_) {
    if (share.raw->held_ > largest.second)
      largest = {target, share.raw->held_};
  }
  return largest;
}

void MemoryAccount::forget(const MemoryShare& share)
{
  std::lock_guard lock(mutex_);
  held_ -= std::min(held_, share.held_);
  for (size_t kind = 0; kind < kMemoryKinds; ++kind)
    by_kind_[kind] -= std::min(by_kind_[kind], share.by_kind_[kind]);
  // A share made for the target meanwhile stays.
  if (auto it = shares_.find(share.target_); it != shares_.end() && it->second.raw == &share)
    shares_.erase(it);
}

MemoryCharge::MemoryCharge(MemoryCharge&& other) noexcept
    : share_(std::move(other.share_)), account_(std::move(other.account_)), kind_(other.kind_),
      bytes_(std::exchange(other.bytes_, 0))
{
}

MemoryCharge& MemoryCharge::operator=(MemoryCharge&& other) noexcept
{
  if (this != &other) {
    reset();
    share_ = std::move(other.share_);
    account_ = std::move(other.account_);
    kind_ = other.kind_;
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

bool MemoryCharge::grow(uint64_t bytes)
{
  if (share_ && !share_->charge(kind_, bytes))
    return false;
  if (account_)
    account_->measure(kind_, bytes, 0);
  bytes_ += bytes;
  return true;
}

void MemoryCharge::shrink(uint64_t bytes)
{
  bytes = std::min(bytes, bytes_);
  if (share_)
    share_->release(kind_, bytes);
  if (account_)
    account_->measure(kind_, 0, bytes);
  bytes_ -= bytes;
}

bool MemoryCharge::set(uint64_t bytes)
{
  if (bytes >= bytes_)
    return grow(bytes - bytes_);
  shrink(bytes_ - bytes);
  return true;
}

void MemoryCharge::reset()
{
  shrink(bytes_);
}

} // namespace flamebpf
