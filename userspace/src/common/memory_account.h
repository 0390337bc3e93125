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
// The account also keeps what it holds by kind (MemoryKind), for the memory breakdown of the
// stats line and /metrics, and measures the kinds that are flamebpf's own or that no target may
// be refused (unwind tables, container names, pending dumps, answers, the interval gathered):
// measured bytes are in the breakdown but in no share, and never refused. The breakdown's total is
// the sum of its kinds.
//
// Holders run on several threads (reads of targets' files may go on in a stall guard's worker,
// answers are made on the server's), so the account is thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace flamebpf {

class MemoryAccount;

// What text holds on the heap besides itself: nothing while it fits in the string (the short
// string buffer), else its capacity and terminator. For holders that measure themselves.
inline uint64_t heap_bytes(const std::string& text)
{
  const char* inside = reinterpret_cast<const char*>(&text);
  bool in_place = text.data() >= inside && text.data() < inside + sizeof(text);
  return in_place ? 0 : text.capacity() + 1;
}

// What a holder's bytes are, one word each as the breakdown names them (memory_kind_name).
enum class MemoryKind : uint8_t {
  // Charged to the share of a target, and refused when the share is taken:
  kSymbols,    // ELF symbol tables, one per cached file
  kInlines,    // inline indexes of ELF files with DWARF
  kPerfMaps,   // JIT perf maps' names and ranges
  kJvmRecords, // HotSpot's code records and methods, read from the JVM
  kPythonCode, // CPython's code objects' names and lines, read from the interpreter
  // Measured only (MemoryCharge made with the account, not a share):
  kUnwindTables,   // the unwind stage's userspace bookkeeping (its rows are in the kernel maps)
  kContainerNames, // the cgroup inventory and the runtimes' container and pod names
  kDumps,          // intervals whose dumps wait in memory for the disk
  kAnswers,        // HTTP answers made and not yet sent
  kIntervals,      // the interval being gathered: its named stacks, until its outputs have them
  // Measured from the allocator when an interval ends (MemoryAccount::measure_heap), so that the
  // breakdown accounts for the whole heap:
  kOther,    // allocated, and measured by none of the kinds above (libraries' own, the stages')
  kHeapFree, // freed, and kept by the allocator rather than given back to the system
};
inline constexpr size_t kMemoryKinds = 12;
inline constexpr std::array<MemoryKind, kMemoryKinds> kAllMemoryKinds = {
    MemoryKind::kSymbols,        MemoryKind::kInlines,    MemoryKind::kPerfMaps,
    MemoryKind::kJvmRecords,     MemoryKind::kPythonCode, MemoryKind::kUnwindTables,
    MemoryKind::kContainerNames, MemoryKind::kDumps,      MemoryKind::kAnswers,
    MemoryKind::kIntervals,      MemoryKind::kOther,      MemoryKind::kHeapFree};
// "symbols", "inlines", "perf_maps", "jvm_records", "python_code", "unwind_tables",
// "container_names", "dumps", "answers", "intervals", "other", "heap_free".
const char* memory_kind_name(MemoryKind kind);

// What the account holds by kind at one moment, read under one lock.
struct MemoryBreakdown {
  std::array<uint64_t, kMemoryKinds> bytes{}; // by MemoryKind
  uint64_t held = 0; // of them, what the targets' shares hold (MemoryAccount::held())
  uint64_t of(MemoryKind kind) const { return bytes[static_cast<size_t>(kind)]; }
  // Every kind's bytes together: the breakdown's sum, by construction.
  uint64_t total() const;
};

// One target's part of the account. Made by MemoryAccount::share; lives while a holder has it.
class MemoryShare {
public:
  MemoryShare(std::shared_ptr<MemoryAccount> account, std::string target);
  ~MemoryShare();
  MemoryShare(const MemoryShare&) = delete;
  MemoryShare& operator=(const MemoryShare&) = delete;

  // Adds bytes of kind to what the share holds if both the share's limit and the account allow
  // it; otherwise holds nothing more, says so once for this share, and returns false.
  [[nodiscard]] bool charge(MemoryKind kind, uint64_t bytes);
  // Gives back bytes of kind charged before.
  void release(MemoryKind kind, uint64_t bytes);
  uint64_t held() const;
  // Charges refused so far.
  uint64_t refusals() const;
  const std::string& target() const { return target_; }

private:
  friend class MemoryAccount;
  std::shared_ptr<MemoryAccount> account_;
  std::string target_;
  uint64_t held_ = 0;                            // guarded by the account's mutex
  uint64_t refusals_ = 0;                        // likewise
  std::array<uint64_t, kMemoryKinds> by_kind_{}; // likewise; sums to held_
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
  // What the shares hold together: the part of the breakdown the account bounds.
  uint64_t held() const;
  // Every kind's bytes, charged and measured.
  MemoryBreakdown breakdown() const;
  // Measures the heap now: what the allocator has allocated beyond every other kind (kOther) and
  // what it keeps free (kHeapFree). Their breakdown then sums to the heap.
  void measure_heap();
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
  friend class MemoryCharge;
  uint64_t share_limit_locked() const;
  void forget(const MemoryShare& share);
  // Measured bytes of kind come and go (MemoryCharge made with the account).
  void measure(MemoryKind kind, uint64_t added, uint64_t removed);

  const uint64_t total_;
  mutable std::mutex mutex_;
  uint64_t held_ = 0;
  std::array<uint64_t, kMemoryKinds> by_kind_{}; // the shares' and the measured bytes
  struct Live {
    std::weak_ptr<MemoryShare> share;
    MemoryShare* raw = nullptr; // what a dying share compares, and what is summed meanwhile
  };
  std::map<std::string, Live> shares_; // live shares, by target
};

// What one holder has charged to a share, or measured in the account, as one kind: grows and
// shrinks with the holder and gives everything back when destroyed or reset. Made with a share,
// it may be refused; made with the account, it is measured and never refused (the kinds that are
// flamebpf's own or that no target may be refused: see MemoryKind). Without either it charges
// nothing and refuses nothing (a holder made by a test, or before its target is known).
class MemoryCharge {
public:
  MemoryCharge() = default;
  MemoryCharge(std::shared_ptr<MemoryShare> share, MemoryKind kind)
      : share_(std::move(share)), kind_(kind)
  {
  }
  MemoryCharge(std::shared_ptr<MemoryAccount> account, MemoryKind kind)
      : account_(std::move(account)), kind_(kind)
  {
  }
  MemoryCharge(MemoryCharge&& other) noexcept;
  MemoryCharge& operator=(MemoryCharge&& other) noexcept;
  MemoryCharge(const MemoryCharge&) = delete;
  MemoryCharge& operator=(const MemoryCharge&) = delete;
  ~MemoryCharge() { reset(); }

  // Charges bytes more; false (nothing charged) if the share refuses.
  [[nodiscard]] bool grow(uint64_t bytes);
  // Gives back bytes (at most what is charged).
  void shrink(uint64_t bytes);
  // Grows or shrinks to bytes (a holder that measures itself now and then); false (nothing
  // changed) if the share refuses the growth.
  [[nodiscard]] bool set(uint64_t bytes);
  // Gives everything back; the share stays.
  void reset();
  uint64_t bytes() const { return bytes_; }
  MemoryKind kind() const { return kind_; }
  const MemoryShare* share() const { return share_.get(); }

private:
  std::shared_ptr<MemoryShare> share_;
  std::shared_ptr<MemoryAccount> account_; // measured, when made with the account
  MemoryKind kind_ = MemoryKind::kSymbols;
  uint64_t bytes_ = 0;
};

} // namespace flamebpf
