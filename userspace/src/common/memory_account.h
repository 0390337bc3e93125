// One budget for everything targets can make flamebpf hold: the names of their perf maps, their
// runtimes' records, the symbols and inline indexes of their ELF files. Each object keeps its
// own budget as well (perf_map.h, each runtime's readers); this one bounds their sum, so that no
// number of processes, maps or files can take flamebpf past the memory limit it is shipped with.
//
// The account is split into shares, one per target (a container, a pod, the host outside them):
// a share may hold at most the larger of the account divided among the live shares and a
// sixteenth of the account, and all shares together at most the account. A target over its share
// is refused further memory, which costs it names (said once per target, with the option that
// helps), never flamebpf's life or another target's names. What a target held before more
// targets arrived stays until its holders let go; the account as a whole is never exceeded.
//
// Holders run on several threads (reads of targets' files may go on in a stall guard's worker),
// so the account is thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace flamebpf {

class MemoryAccount;

// One target's part of the account. Made by MemoryAccount::share; lives while a holder has it.
class MemoryShare {
public:
  MemoryShare(std::shared_ptr<MemoryAccount> account, std::string target);
  ~MemoryShare();
  MemoryShare(const MemoryShare&) = delete;
  MemoryShare& operator=(const MemoryShare&) = delete;

  // Adds bytes to what the share holds if both the share's limit and the account allow it;
  // otherwise holds nothing more, says so once for this share, and returns false.
  [[nodiscard]] bool charge(uint64_t bytes);
  // Gives back bytes charged before.
  void release(uint64_t bytes);
  uint64_t held() const;
  // Charges refused so far.
  uint64_t refusals() const;
  const std::string& target() const { return target_; }

private:
  friend class MemoryAccount;
  std::shared_ptr<MemoryAccount> account_;
  std::string target_;
  uint64_t held_ = 0;     // guarded by the account's mutex
  uint64_t refusals_ = 0; // likewise
};

class MemoryAccount : public std::enable_shared_from_this<MemoryAccount> {
public:
  // total_bytes bounds everything charged to every share together.
  static std::shared_ptr<MemoryAccount> create(uint64_t total_bytes);
  MemoryAccount(const MemoryAccount&) = delete;
  MemoryAccount& operator=(const MemoryAccount&) = delete;

  // The share of target, made on first use; the same while any holder keeps it.
  std::shared_ptr<MemoryShare> share(const std::string& target);

  uint64_t total() const { return total_; }
  uint64_t held() const;
  // What one share may hold now: the account divided among the live shares, at least a
  // sixteenth of it.
  uint64_t share_limit() const;
  size_t live_shares() const;
  // The largest share's target and what it holds ("" and 0 when nothing is held).
  std::pair<std::string, uint64_t> largest() const;

  // What flamebpf's account is when nothing says otherwise: well below the shipped MemoryMax
  // (2 GiB), which also holds flamebpf's own intervals, answers, kernel maps and code.
  static constexpr uint64_t kDefaultTotalBytes = uint64_t{1} << 30;
  // A share's floor, as a part of the account: a node's many small containers each keep enough
  // for a Java service's names, and sixteen targets at their floor fill the account.
  static constexpr uint64_t kFloorDivisor = 16;

private:
  explicit MemoryAccount(uint64_t total_bytes) : total_(total_bytes) {}
  friend class MemoryShare;
  uint64_t share_limit_locked() const;
  void forget(const MemoryShare& share);

  const uint64_t total_;
  mutable std::mutex mutex_;
  uint64_t held_ = 0;
  struct Live {
    std::weak_ptr<MemoryShare> share;
    MemoryShare* raw = nullptr; // what a dying share compares, and what is summed meanwhile
  };
  std::map<std::string, Live> shares_; // live shares, by target
};

// What one holder has charged to a share: grows and shrinks with the holder and gives everything
// back when destroyed or reset. Without a share it charges nothing and refuses nothing (a holder
// made by a test, or before its target is known).
class MemoryCharge {
public:
  MemoryCharge() = default;
  explicit MemoryCharge(std::shared_ptr<MemoryShare> share) : share_(std::move(share)) {}
  MemoryCharge(MemoryCharge&& other) noexcept;
  MemoryCharge& operator=(MemoryCharge&& other) noexcept;
  MemoryCharge(const MemoryCharge&) = delete;
  MemoryCharge& operator=(const MemoryCharge&) = delete;
  ~MemoryCharge() { reset(); }

  // Charges bytes more; false (nothing charged) if the share refuses.
  [[nodiscard]] bool grow(uint64_t bytes);
  // Gives back bytes (at most what is charged).
  void shrink(uint64_t bytes);
  // Gives everything back; the share stays.
  void reset();
  uint64_t bytes() const { return bytes_; }
  const MemoryShare* share() const { return share_.get(); }

private:
  std::shared_ptr<MemoryShare> share_;
  uint64_t bytes_ = 0;
};

} // namespace flamebpf
